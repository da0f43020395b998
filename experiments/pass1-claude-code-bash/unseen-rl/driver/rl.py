"""Driver: experiment_pass1.probe (procgen-train-rl *-1[34]), rl on the probed mix, select_rl_step (*-20), one run, timed."""
import json
import sys
import time
from pathlib import Path

from trainers.scripts import experiment_pass1 as E

run, seed = sys.argv[1], int(sys.argv[2])
size = E.Size(seed=seed)
work = Path(f"/tmp/i16s8/{run}")
sft = work / "sft" / "final"
times = {}
t0 = time.perf_counter()
categories = E.probe(work, sft, size)
times["probe"] = round(time.perf_counter() - t0, 1)
print(f"== probe {run}: {times['probe']}s -> {categories}", flush=True)
(work / "seconds-rl.json").write_text(json.dumps(times))
if not categories:
    print("no template varies: no RL", flush=True)
    sys.exit(3)
t0 = time.perf_counter()
final = E.rl(work, sft, size, categories)
times["rl"] = round(time.perf_counter() - t0, 1)
print(f"== rl {run}: {times['rl']}s -> {final}", flush=True)
(work / "seconds-rl.json").write_text(json.dumps(times))
t0 = time.perf_counter()
chosen = E.select_rl_step(work, final, size)
times["select_rl_step"] = round(time.perf_counter() - t0, 1)
print(f"== select {run}: {times['select_rl_step']}s -> {chosen}", flush=True)
(work / "seconds-rl.json").write_text(json.dumps(times))
