#!/bin/bash
# after-RL evaluations of the selected step, started as soon as the step selection is written
# (beside the after-SFT evaluations still running at nice 5, instead of after them: the time box)
r=$1; s=$2
# the code the GRPO and after-SFT runs started with (41d14cd), not the worktree rebased meanwhile
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH=/tmp/i16s7/code
D=/tmp/i16s7; W=$D/$r
while [ ! -f $W/rl/selection.json ]; do sleep 10; done
STEP=$(python3 -c "import json;print(json.load(open('$W/rl/selection.json'))['step'])")
echo "selected step $STEP $(date -u +%T)"
python3 $D/driver/eval.py $r $s after-rl $W/rl/checkpoint-$STEP/model after-rl,after-rl-sampled > $W/eval-rl.log 2>&1
echo "after-rl evals done rc=$? $(date -u +%T)"
