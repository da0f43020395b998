set -e
mkdir -p output
cp input/quote.txt output/quote.txt
