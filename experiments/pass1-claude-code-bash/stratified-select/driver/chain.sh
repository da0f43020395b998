#!/bin/bash
# one run after SFT: GRPO + step selection (nice 0) beside the after-SFT evaluations named in $3 (nice 5),
# then the after-RL evaluations of the selected step
r=$1; s=$2; SFT_EVALS=$3
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH=/work/wt/issue-16
D=/tmp/i16s7; W=$D/$r
while [ ! -f $W/sft/final/config.json ]; do sleep 10; done
sleep 5
echo "rl start $(date -u +%T)"
python3 $D/driver/rl.py $r $s > $W/rl.log 2>&1 &
RL=$!
echo $RL > $W/rl.pid
nice -n 5 python3 $D/driver/eval.py $r $s after-sft $W/sft/final $SFT_EVALS > $W/eval-sft.log 2>&1
echo "after-sft evals done $(date -u +%T)"
wait $RL; rc=$?
echo "rl + select done rc=$rc $(date -u +%T)"
[ $rc = 0 ] || exit 1
STEP=$(python3 -c "import json;print(json.load(open('$W/rl/selection.json'))['step'])")
python3 $D/driver/eval.py $r $s after-rl $W/rl/checkpoint-$STEP/model after-rl,after-rl-sampled,val-after-rl > $W/eval-rl.log 2>&1
echo "after-rl evals done $(date -u +%T)"
