#!/bin/bash
cd /work/main
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONUNBUFFERED=1
while pgrep -f fixed_sft.py >/dev/null; do sleep 5; done
echo "rl start $(date -u +%T)"
python3 /tmp/i16s9/weighted_rl.py > /tmp/i16s9/w1.log 2>&1; echo "done rc=$? $(date -u +%T)"
