#!/bin/bash
# session 9: both seeds of the one-command pipeline, side by side; seed 1 starts once seed 0's capture is written
cd /work/main
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONUNBUFFERED=1
E=experiments/pass1-claude-code-bash/sft32
W=/tmp/i16s9
mkdir -p $W/r1 $W/r2
echo "start $(date -u +%T)"
python3 trainers/scripts/experiment_pass1.py --out $E/run1 --work $W/r1 --seed 0 > $W/r1.log 2>&1 &
P1=$!
while [ ! -f $W/r1/expert-dataset/dataset_info.json ]; do sleep 5; kill -0 $P1 2>/dev/null || { echo "r1 died"; exit 1; }; done
sleep 3
cp -r $W/r1/expert-dataset $W/r2/
echo "capture done $(date -u +%T)"
python3 trainers/scripts/experiment_pass1.py --out $E/run2 --work $W/r2 --seed 1 > $W/r2.log 2>&1 &
P2=$!
wait $P1; echo "r1 rc=$? $(date -u +%T)"
wait $P2; echo "r2 rc=$? $(date -u +%T)"
