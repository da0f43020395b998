"""Driver: experiment_pass1.sft of one run (its seed), timed."""
import sys
import time
from pathlib import Path

from trainers.scripts import experiment_pass1 as E

run, seed = sys.argv[1], int(sys.argv[2])
size = E.Size(seed=seed)
work = Path(f"/tmp/i16s8/{run}")
work.mkdir(parents=True, exist_ok=True)
t0 = time.perf_counter()
m = E.sft(work, E.build_model(work, size), Path("/tmp/i16s8/shared/expert-dataset"), size)
print(f"== sft {run}: {time.perf_counter() - t0:.0f}s -> {m}", flush=True)
