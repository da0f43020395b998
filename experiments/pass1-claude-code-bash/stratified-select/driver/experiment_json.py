"""Driver: experiment.json of the stratified-select runs from the committed folders and the work dirs' timings."""
import json
import sys
from dataclasses import asdict
from pathlib import Path

from trainers.scripts.experiment_pass1 import Size

dest = Path(sys.argv[1])
meta = json.loads((dest / "how.json").read_text())  # command, how_run, recipe notes written by hand
size = asdict(Size())
results, seconds, rl_hist, sft_loss, selection = {}, {}, {}, {}, {}
for i, run in ((1, "r1"), (2, "r2")):
    d = dest / f"run{i}"
    W = Path(f"/tmp/i16s7/{run}")
    res = {}
    for folder in sorted(p for p in d.iterdir() if (p / "attempts").is_dir()):
        recs = [json.loads(f.read_text()) for f in (folder / "attempts").rglob("*.json")]
        passed = sum(r["status"] == "passed" for r in recs)
        res[folder.name] = f"{passed}/{len(recs)} ({100 * passed / max(1, len(recs)):.1f}%)"
    results[f"run{i}"] = res
    for f in sorted((W / "out").glob("seconds-*.json")):
        seconds.update({f"{k}_run{i}": v for k, v in json.loads(f.read_text()).items()})
    for k, v in json.loads((W / "seconds-rl.json").read_text()).items():
        seconds[f"{k}_run{i}"] = v
    rl_hist[str(i)] = [{k: round(v, 4) for k, v in h.items() if k in ("step", "reward", "groups_trained", "groups_skipped", "loss",
                                                                      "grad_norm", "kl", "train_s", "rollout_s")}
                       for h in json.loads((d / "rl-history.json").read_text())]
    sft_loss[str(i)] = [{"step": h["step"], "loss": round(h["loss"], 4), "step_s": round(h.get("step_s", 0), 1)}
                        for h in json.loads((d / "sft_state.json").read_text())["log_history"] if "loss" in h]
    selection[f"run{i}"] = json.loads((d / "selection.json").read_text())
meta.update({"size": size, "size_note": "run 2: seed 1; no probe (rl_categories fixed)", "seconds": seconds,
             "held_out_26_and_val_13": results, "rl_selection": selection, "sft_loss": sft_loss, "rl_history": rl_hist})
(dest / "experiment.json").write_text(json.dumps(meta, indent=1))
(dest / "how.json").unlink()
print(json.dumps(results, indent=1))
