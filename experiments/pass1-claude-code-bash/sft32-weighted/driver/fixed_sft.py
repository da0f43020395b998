"""Session 9: the 32-step SFT again with pack_nll (per-call token weights), seed 0; then greedy held-out and validation."""
import sys, time
from pathlib import Path
sys.path.insert(0, "/work/main")
from trainers.scripts.experiment_pass1 import Size, sft, evaluate, build_model, RL_SUITE
out = Path("/work/main/experiments/pass1-claude-code-bash/sft32-weighted/run1")
work = Path("/tmp/i16s9/f1")
size = Size(seed=0)
t0 = time.perf_counter()
model = sft(work, build_model(work, size), work / "expert-dataset", size)
print(f"== sft: {time.perf_counter() - t0:.0f}s", flush=True)
for name, suite, tasks in (("after-sft", "procgen-test", size.test_tasks), ("val-after-sft", RL_SUITE, size.val_tasks)):
    t0 = time.perf_counter()
    evaluate(name, model, out / name, size, suite=suite, tasks=tasks)
    print(f"== {name}: {time.perf_counter() - t0:.0f}s", flush=True)
