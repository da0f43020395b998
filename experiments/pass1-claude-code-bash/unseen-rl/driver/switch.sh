#!/bin/bash
# time box: once run $1's probe has chosen the mix, stop its chain (before GRPO's first rollouts) and start chain2.sh
r=$1; s=$2; pg=$3
while [ ! -f /tmp/i16s8/$r/probe/categories.json ]; do sleep 1; done
kill -- -$pg
echo "killed chain $pg at $(date -u +%T)"
sleep 3
setsid nohup nice -n 5 bash /tmp/i16s8/driver/chain2.sh $r $s > /tmp/i16s8/chain2-$r.log 2>&1 &
echo "chain2 started"
