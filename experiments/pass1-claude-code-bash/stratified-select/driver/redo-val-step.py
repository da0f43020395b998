"""Driver: rerun one step's validation evaluation (its first run hit an ImportError in every attempt: the worktree
was rebased under it) and write the selection again from every step's val records, as select_rl_step does."""
import json
import shutil
import sys
from pathlib import Path

from clawgym_env.runner import load_attempts
from trainers.scripts import experiment_pass1 as E

run, seed, step = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
size = E.Size(seed=seed)
rl = Path(f"/tmp/i16s7/{run}/rl")
out = rl / f"val-step-{step}"
shutil.move(out, rl / f"val-step-{step}-importerror")
E.evaluate(out.name, rl / f"checkpoint-{step}" / "model", out, size, suite=E.TRAIN_SUITE, tasks=size.val_tasks)
scores = {}
for k in sorted(int(p.name.split("-")[2]) for p in rl.glob("val-step-*") if p.name.split("-")[2].isdigit()):
    attempts = load_attempts(rl / f"val-step-{k}")
    scores[k] = sum(a.score for a in attempts) / max(1, len(attempts))
best = E.best_step(scores)
print(f"rl selection on {size.val_tasks}: " + ", ".join(f"step {k} {v:.3f}" for k, v in scores.items()) + f" -> step {best}", flush=True)
(rl / "selection.json").write_text(json.dumps({"val_tasks": size.val_tasks, "scores": scores, "step": best}, indent=1))
