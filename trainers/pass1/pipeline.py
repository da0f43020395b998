"""The whole Pass@1 pipeline, stage by stage, reusing what an earlier run of the same folders finished."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from trainers.pass1.evaluate import check_reuse, evaluate
from trainers.pass1.size import Size, evaluations
from trainers.pass1.stages import build_model, capture, probe, rl, select_rl_step, sft

__all__ = ["run"]


def run(out: Path, work: Path, size: Size, reuse_before: Path | None = None) -> dict[str, Any]:
    """The whole pipeline; returns the per-stage timings. Stages already done in ``work`` are reused.

    ``reuse_before``: an earlier run's results folder whose before-SFT evaluations (the starting model, so the
    same for every run of one seed) are copied instead of rerun (about 25 min of the full size), each only if its
    manifest is exactly the bench run this one would make; otherwise a ConfigError says which field differs.
    """
    times: dict[str, float] = {}

    def timed(name: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        value = fn(*args, **kwargs)
        times[name] = round(time.perf_counter() - t0, 1)
        print(f"== {name}: {times[name]:.0f}s", flush=True)
        return value

    work.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    model = timed("build_model", build_model, work, size)
    reused = check_reuse(reuse_before, model, size)  # before an hour of training, not after
    dataset = timed("capture", capture, work, model, size)
    models = {"before": model}
    models["after-sft"] = timed("sft", sft, work, model, dataset, size)
    categories = timed("probe", probe, work, models["after-sft"], size)
    final = timed("rl", rl, work, models["after-sft"], size, categories)
    models["after-rl"] = timed("select_rl_step", select_rl_step, work, final, size)
    selection = work / "rl" / "selection.json"
    chosen = work / "rl" / f"val-step-{json.loads(selection.read_text())['step']}" if selection.is_file() else None
    for e in evaluations(size):
        target = out / e.name
        if target.exists():
            shutil.rmtree(target)
        if e.name in reused:
            shutil.copytree(reused[e.name], target)
            continue
        if e.name == "val-after-rl" and chosen is not None:  # select_rl_step ran this same bench run of this model
            shutil.copytree(chosen, target)
            continue
        timed(
            e.name if e.name.startswith("val-") else f"eval-{e.name}",
            evaluate,
            e.name,
            models[e.stage],
            target,
            size,
            suite=e.suite,
            tasks=e.tasks,
            attempts=e.attempts,
            temperature=e.temperature,
        )
    meta = {
        "size": asdict(size),
        "seconds": times,
        "rl_categories": categories,
        "total_s": round(sum(times.values()), 1),
        "reused": {name: str(folder) for name, folder in reused.items()},
        "rl_selection": json.loads(selection.read_text()) if selection.is_file() else None,
        "command": " ".join(["python", "trainers/scripts/experiment_pass1.py", *sys.argv[1:]]),
    }
    (out / "experiment.json").write_text(json.dumps(meta, indent=1))
    subprocess.run(["clawgym", "bench", "compare", str(out / "before"), str(out / "after-sft")], check=False)
    subprocess.run(["clawgym", "bench", "compare", str(out / "after-sft"), str(out / "after-rl")], check=False)
    if size.eval_samples:
        subprocess.run(["clawgym", "bench", "compare", str(out / "after-sft-sampled"), str(out / "after-rl-sampled")], check=False)
    return meta
