"""Driver: one stage of experiment_pass1 per process (sessions 4/5 did the same)."""
import json
import sys
import time
from pathlib import Path
from trainers.scripts import experiment_pass1 as E
stage, run, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
size = E.Size(seed=seed)
work = Path(f"/tmp/i16s6/{run}")
work.mkdir(parents=True, exist_ok=True)
ds = Path("/tmp/i16s6/shared/expert-dataset")
t0 = time.perf_counter()
if stage == "sft":
    m = E.sft(work, E.build_model(work, size), ds, size)
elif stage == "rl":
    cats = json.loads(sys.argv[4])
    m = E.rl(work, work / "sft" / "final", size, cats)
print(f"== {stage} {run}: {time.perf_counter() - t0:.0f}s -> {m}", flush=True)
