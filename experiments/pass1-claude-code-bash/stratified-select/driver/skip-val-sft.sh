#!/bin/bash
# time box: stop the after-SFT evaluation process once after-sft-sampled is written, before it starts val-after-sft
r=$1; pid=$2
while [ ! -f /tmp/i16s7/$r/out/seconds-after-sft-sampled.json ]; do sleep 3; done
for c in $(pgrep -P $pid); do kill $c; done; kill $pid
echo "stopped $pid before val-after-sft $(date -u +%T)"
