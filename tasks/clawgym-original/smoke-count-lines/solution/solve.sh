set -e
wc -l < input/words.txt | tr -d ' ' > count.txt
