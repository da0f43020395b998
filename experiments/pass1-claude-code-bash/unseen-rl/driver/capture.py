"""Driver: the expert capture once (experiment_pass1.build_model + capture), timed; both runs' SFT read it."""
import time
from pathlib import Path

from trainers.scripts.experiment_pass1 import Size, build_model, capture

size = Size()
work = Path("/tmp/i16s8/shared")
t0 = time.perf_counter()
m = build_model(work, size)
print("model", m, flush=True)
d = capture(work, m, size)
print("capture", d, round(time.perf_counter() - t0, 1), "s", flush=True)
