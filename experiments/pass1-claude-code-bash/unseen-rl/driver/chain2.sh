#!/bin/bash
# one run after the probe: GRPO (no step selection: time box), then held-out evaluations (greedy first), one process at a time
r=$1; s=$2
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH=/tmp/snap-issue-16-2
D=/tmp/i16s8; W=$D/$r
cd /tmp/snap-issue-16-2
echo "rl2 start $(date -u +%T)"
python3 $D/driver/rl2.py $r $s > $W/rl2.log 2>&1; rc=$?
echo "rl done rc=$rc $(date -u +%T)"
[ $rc = 0 ] || exit 1
RL=$W/rl/final/model
python3 $D/driver/eval.py $r $s after-rl $RL after-rl > $W/eval-rl.log 2>&1
python3 $D/driver/eval.py $r $s after-sft $W/sft/final after-sft > $W/eval-sft.log 2>&1
echo "greedy evals done $(date -u +%T)"
python3 $D/driver/eval.py $r $s after-rl $RL after-rl-sampled >> $W/eval-rl.log 2>&1
python3 $D/driver/eval.py $r $s after-sft $W/sft/final after-sft-sampled >> $W/eval-sft.log 2>&1
echo "sampled evals done $(date -u +%T)"
python3 $D/driver/eval.py $r $s after-rl $RL val-after-rl >> $W/eval-rl.log 2>&1
python3 $D/driver/eval.py $r $s after-sft $W/sft/final val-after-sft >> $W/eval-sft.log 2>&1
echo "val done $(date -u +%T)"
