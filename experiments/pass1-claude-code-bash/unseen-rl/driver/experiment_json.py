"""Driver: experiment.json of session 8's runs (settings, stage times, figures from the collected folders)."""
import json
import sys
from dataclasses import asdict
from pathlib import Path

from trainers.scripts.experiment_pass1 import Size

root = Path(sys.argv[1])
figs = json.loads(Path(sys.argv[2]).read_text())
sec = {}
for r, run in (("r1", "run1"), ("r2", "run2")):
    W = Path(f"/tmp/i16s8/{r}")
    sec[f"sft_{run}"] = float(open(W / "sft.log").read().split(f"== sft {r}: ")[1].split("s")[0])
    sec[f"probe_{run}"] = json.loads((W / "seconds-rl.json").read_text())["probe"]
    sec[f"rl_{run}"] = json.loads((W / "seconds-rl2.json").read_text())["rl"]
    for f in sorted((W / "out").glob("seconds-*.json")):
        for k, v in json.loads(f.read_text()).items():
            sec[f"eval_{k}_{run}"] = v
sec["capture"] = 117.2
hist = {run: json.loads((root / run / "rl-history.json").read_text()) for run in ("run1", "run2")}
meta = {
    "command": "stages of trainers/scripts/experiment_pass1.py as separate processes (driver/: sft-both.sh = capture.py once, then "
               "sft.py per seed side by side; chain.sh ran rl.py until the probe had written the mix, then chain2.sh = rl2.py "
               "(GRPO, rl_select=False) and eval.py (greedy after-RL, after-SFT), then chain3.sh = eval_k1.py (sampled, k=1)); "
               "run 2: seed 1. One-command equivalent: python trainers/scripts/experiment_pass1.py --out DIR --no-select "
               "--eval-samples 1 [--seed 1] (it also runs the validation evaluations skipped here)",
    "how_run": "session 8, 2026-12-02 15:31-17:2x UTC, 2 cores shared with other engineers' jobs (vLLM server, pytest tiers, "
               "harness benchmarks), load 4-20, nice 5, OMP_NUM_THREADS=1; both seeds side by side at every stage; code: "
               "snapshot of 0b7afa0 (capture, SFT) and of ade8652 (probe, GRPO, evaluations; same as main's experiment_pass1 "
               "but the --no-select/--eval-samples flags)",
    "recipe_fixed_before_any_evaluation": "/work/notes/issue-16.md at 15:37 UTC; time-box changes (no step selection, no "
               "validation evaluations, sampled k=1) at 16:20-16:40, after the probes (train data) and before any held-out "
               "or validation evaluation",
    "size": asdict(Size(rl_select=False, eval_samples=1)),
    "size_note": "run 2: seed 1; val_tasks *-20 not evaluated (time box)",
    "before": "not rerun: session 4's committed before/ (*-01) and held-out-02/before/ (*-02): 0/26 greedy",
    "rl_categories": {run: json.loads((root / run / "probe-categories.json").read_text()) for run in ("run1", "run2")},
    "probe": {run: figs[run]["probe"]["per_template"] for run in ("run1", "run2")},
    "rl_steps": {run: [{k: m[k] for k in ("step", "reward", "groups_trained", "groups_skipped", "kl", "rollout_s", "train_s")}
                       for m in hist[run]] for run in hist},
    "seconds": sec,
    "held_out_26": {run: {k: v["passed"] for k, v in figs[run].items() if k != "probe"} for run in ("run1", "run2")},
    "per_template": {run: {k: v["per_template"] for k, v in figs[run].items()} for run in ("run1", "run2")},
}
(root / "experiment.json").write_text(json.dumps(meta, indent=1) + "\n")
print(json.dumps(meta["held_out_26"], indent=1))
