#!/bin/bash
# time box: once run $1's greedy evaluations are done, stop chain2 and run the sampled ones with k = 1 (26 attempts)
r=$1; s=$2; pg=$3
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH=/tmp/snap-issue-16-2
D=/tmp/i16s8; W=$D/$r
while ! grep -q "greedy evals done" $D/chain2-$r.log; do sleep 2; done
kill -- -$pg
echo "killed chain2 $pg at $(date -u +%T)"
sleep 3
rm -rf $W/out/after-rl-sampled
cd /tmp/snap-issue-16-2
nice -n 5 python3 $D/driver/eval_k1.py $r $s after-rl $W/rl/final/model after-rl-sampled >> $W/eval-rl.log 2>&1
nice -n 5 python3 $D/driver/eval_k1.py $r $s after-sft $W/sft/final after-sft-sampled >> $W/eval-sft.log 2>&1
echo "sampled (k=1) evals done $(date -u +%T)"
