# Reference solution. It runs the same way for every variant, so it writes each variant's file.
set -e
printf 'hello world\n' > hello.txt
printf 'good morning\n' > greeting.txt
