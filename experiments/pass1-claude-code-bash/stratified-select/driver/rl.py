"""Driver: experiment_pass1.rl of one run on the fixed RL mix, then select_rl_step (validation *-12), timed."""
import json
import sys
import time
from pathlib import Path

from trainers.scripts import experiment_pass1 as E

CATEGORIES = ["append-line", "copy-file", "count-lines", "delete-file", "make-folders", "rename-file", "write-number"]
run, seed = sys.argv[1], int(sys.argv[2])
size = E.Size(seed=seed)
work = Path(f"/tmp/i16s7/{run}")
times = {}
t0 = time.perf_counter()
final = E.rl(work, work / "sft" / "final", size, CATEGORIES)
times["rl"] = round(time.perf_counter() - t0, 1)
print(f"== rl {run}: {times['rl']}s -> {final}", flush=True)
(work / "seconds-rl.json").write_text(json.dumps(times))
t0 = time.perf_counter()
chosen = E.select_rl_step(work, final, size)
times["select_rl_step"] = round(time.perf_counter() - t0, 1)
print(f"== select {run}: {times['select_rl_step']}s -> {chosen}", flush=True)
(work / "seconds-rl.json").write_text(json.dumps(times))
