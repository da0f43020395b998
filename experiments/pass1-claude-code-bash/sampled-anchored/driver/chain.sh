#!/bin/bash
# one seed after SFT: GRPO (nice 0) beside the after-SFT evaluations (nice 5), then the after-RL evaluations
r=$1; s=$2
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH=/work/wt/issue-16
W=/tmp/i16s6/$r
CATS='["append-line","copy-file","count-lines","delete-file","make-folders","rename-file","write-number"]'
while [ ! -f $W/sft/final/config.json ]; do sleep 10; done
sleep 5
echo "rl start $(date -u +%T)"
python3 /tmp/i16s6/stage.py rl $r $s "$CATS" > $W/rl.log 2>&1 &
RL=$!
echo $RL > $W/rl.pid
nice -n 5 python3 /tmp/i16s6/eval.py $r $s after-sft $W/sft/final after-sft,after-sft-sampled > $W/eval-sft.log 2>&1
echo "after-sft evals done $(date -u +%T)"
wait $RL
echo "rl done rc=$? $(date -u +%T)"
python3 /tmp/i16s6/eval.py $r $s after-rl $W/rl/final/model after-rl,after-rl-sampled > $W/eval-rl.log 2>&1
echo "after-rl evals done $(date -u +%T)"
