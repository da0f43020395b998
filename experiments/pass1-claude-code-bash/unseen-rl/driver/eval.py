"""Driver: the named evaluations of one stage of one run (experiment_pass1.evaluations plan), timed."""
import json
import sys
import time
from pathlib import Path

from trainers.scripts import experiment_pass1 as E

run, seed, stage, model = sys.argv[1], int(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
names = sys.argv[5].split(",")
size = E.Size(seed=seed)
out = Path(f"/tmp/i16s8/{run}/out")
out.mkdir(parents=True, exist_ok=True)
for e in E.evaluations(size):
    if e.stage != stage or e.name not in names:
        continue
    t0 = time.perf_counter()
    E.evaluate(e.name, model, out / e.name, size, suite=e.suite, tasks=e.tasks, attempts=e.attempts, temperature=e.temperature)
    took = round(time.perf_counter() - t0, 1)
    print(f"== {run} {e.name}: {took}s", flush=True)
    (out / f"seconds-{e.name}.json").write_text(json.dumps({e.name: took}))
