#!/bin/bash
# one run after SFT: probe + GRPO + step selection, then the held-out evaluations (greedy first), one process at a time
r=$1; s=$2
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH=/tmp/snap-issue-16-2
D=/tmp/i16s8; W=$D/$r
cd /tmp/snap-issue-16-2
while [ ! -f $W/sft/final/config.json ]; do sleep 10; done
sleep 5
echo "rl start $(date -u +%T)"
python3 $D/driver/rl.py $r $s > $W/rl.log 2>&1; rc=$?
echo "probe + rl + select done rc=$rc $(date -u +%T)"
[ $rc = 0 ] || exit 1
STEP=$(python3 -c "import json;print(json.load(open('$W/rl/selection.json'))['step'])")
RL=$W/rl/checkpoint-$STEP/model
python3 $D/driver/eval.py $r $s after-rl $RL after-rl > $W/eval-rl.log 2>&1
python3 $D/driver/eval.py $r $s after-sft $W/sft/final after-sft > $W/eval-sft.log 2>&1
echo "greedy evals done $(date -u +%T)"
python3 $D/driver/eval.py $r $s after-rl $RL after-rl-sampled >> $W/eval-rl.log 2>&1
python3 $D/driver/eval.py $r $s after-sft $W/sft/final after-sft-sampled >> $W/eval-sft.log 2>&1
echo "sampled evals done $(date -u +%T)"
python3 $D/driver/eval.py $r $s after-sft $W/sft/final val-after-sft >> $W/eval-sft.log 2>&1
echo "val-after-sft done $(date -u +%T)"
