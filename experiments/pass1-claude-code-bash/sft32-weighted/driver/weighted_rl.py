"""Session 9: the rest of the pipeline (probe, GRPO, step selection, evaluations) from the pack_nll SFT of seed 0.
The before-SFT evaluations are not rerun: the base model is the one of sft32/run1 (0 / 26 greedy, 0 / 52 sampled)."""
import json, shutil, sys, time
from pathlib import Path
sys.path.insert(0, "/work/main")
from trainers.scripts.experiment_pass1 import Size, probe, rl, select_rl_step, evaluate, RL_SUITE
out = Path("/work/main/experiments/pass1-claude-code-bash/sft32-weighted/run1")
work = Path("/tmp/i16s9/f1")
size = Size(seed=0)
times = {}
def timed(name, fn, *a, **k):
    t0 = time.perf_counter(); v = fn(*a, **k); times[name] = round(time.perf_counter() - t0, 1)
    print(f"== {name}: {times[name]:.0f}s", flush=True); return v
sft_model = work / "sft" / "final"
cats = timed("probe", probe, work, sft_model, size)
final = timed("rl", rl, work, sft_model, size, cats)
rl_model = timed("select_rl_step", select_rl_step, work, final, size)
sel = json.loads((work / "rl" / "selection.json").read_text())
shutil.copytree(work / "rl" / f"val-step-{sel['step']}", out / "val-after-rl", dirs_exist_ok=True)
timed("eval-after-rl", evaluate, "after-rl", rl_model, out / "after-rl", size)
timed("eval-after-sft-sampled", evaluate, "after-sft-sampled", sft_model, out / "after-sft-sampled", size, attempts=2, temperature=1.0)
timed("eval-after-rl-sampled", evaluate, "after-rl-sampled", rl_model, out / "after-rl-sampled", size, attempts=2, temperature=1.0)
(out / "experiment.json").write_text(json.dumps({"size": size.__dict__, "seconds": times, "rl_categories": cats, "rl_selection": sel,
    "command": "session 9 drivers /tmp/i16s9/fixed_sft.py then weighted_rl.py (stage functions of experiment_pass1.py; before-SFT evaluations not rerun)"}, indent=1))
