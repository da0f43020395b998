#!/bin/bash
# GRPO restarted after the config fix (the first chain's rl died at once); then the after-RL evaluations
r=$1; s=$2
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH=/work/wt/issue-16
W=/tmp/i16s6/$r
CATS='["append-line","copy-file","count-lines","delete-file","make-folders","rename-file","write-number"]'
rm -rf $W/rl
echo "rl start $(date -u +%T)"
python3 /tmp/i16s6/stage.py rl $r $s "$CATS" > $W/rl.log 2>&1
echo "rl done rc=$? $(date -u +%T)"
python3 /tmp/i16s6/eval.py $r $s after-rl $W/rl/final/model after-rl,after-rl-sampled > $W/eval-rl.log 2>&1
echo "after-rl evals done $(date -u +%T)"
