"""Driver: the probe's mix (reused from rl.py's probe), experiment_pass1.rl with rl_select=False (time box), one run, timed."""
import json
import sys
import time
from pathlib import Path

from trainers.scripts import experiment_pass1 as E

run, seed = sys.argv[1], int(sys.argv[2])
size = E.Size(seed=seed, rl_select=False)
work = Path(f"/tmp/i16s8/{run}")
sft = work / "sft" / "final"
categories = E.probe(work, sft, size)
print(f"probe mix {run}: {categories}", flush=True)
t0 = time.perf_counter()
final = E.rl(work, sft, size, categories)
took = round(time.perf_counter() - t0, 1)
print(f"== rl {run}: {took}s -> {final}", flush=True)
(work / "seconds-rl2.json").write_text(json.dumps({"rl": took}))
