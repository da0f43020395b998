#!/bin/bash
# capture once, then both seeds' SFT side by side (un-niced: the priority job)
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH=/tmp/snap-issue-16-1
D=/tmp/i16s8
mkdir -p $D/r1 $D/r2 $D/shared
echo "capture start $(date -u +%T)"
python3 $D/driver/capture.py > $D/shared/capture.log 2>&1 || { echo "capture failed"; exit 1; }
echo "capture done $(date -u +%T)"
python3 $D/driver/sft.py r1 0 > $D/r1/sft.log 2>&1 &
P1=$!
python3 $D/driver/sft.py r2 1 > $D/r2/sft.log 2>&1 &
P2=$!
echo "$P1 $P2" > $D/sft.pids
wait $P1; echo "sft r1 rc=$? $(date -u +%T)"
wait $P2; echo "sft r2 rc=$? $(date -u +%T)"
