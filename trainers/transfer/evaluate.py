"""Measuring an adapter: ``clawgym bench run`` of base + adapter on a split, and a run's checkpoint chosen on validation.

Every evaluation is the benchmark's own command (real harnesses, sandboxes, hidden graders, a results
folder with one record per attempt), so any figure of the experiment is reproduced by the command its
``manifest.json`` holds. A folder whose attempts are all recorded is not run again; a partial one is
resumed by the runner.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from clawgym_env.errors import ConfigError
from trainers.transfer.design import REPO, Design, Evaluation

__all__ = ["bench_command", "best_checkpoint", "complete", "evaluate", "mean_score", "model_spec", "publish_adapter", "record_dir"]


def record_dir(out: Path, arm: str, seed: int | None = None) -> Path:
    """The committed records of an arm (``OUT/records/<arm>``) and of one of its seeds (``.../seed<k>``)."""
    folder = out / "records" / arm
    return folder if seed is None else folder / f"seed{seed}"


def model_spec(adapter: Path, design: Design, seed: int) -> str:
    """The policy spec: the embedded SmolLM2 with ``adapter`` merged in; calls in flight decode together, and the
    backend's seed derives each call's sampling seed from its session (``bench run --seed`` would repeat samples)."""
    return f"hf:smollm2?adapter={adapter}&max_batch={design.eval_concurrency}&seed={seed}"


def bench_command(adapter: Path, out: Path, design: Design, e: Evaluation, seed: int) -> list[str]:
    suite = design.test_suite if e.split == "test" else design.train_suite
    return [
        "clawgym",
        "bench",
        "run",
        "--model",
        model_spec(adapter, design, seed),
        "--harness",
        design.eval_harnesses,
        "--suite",
        suite,
        "--tasks",
        design.task_patterns(e.split),
        "-k",
        str(e.attempts),
        "--concurrency",
        str(design.eval_concurrency),
        "--max-tokens",
        str(design.rl.max_tokens),
        "--temperature",
        str(e.temperature),
        "--out",
        str(out),
        "--no-progress",
    ]


def complete(folder: Path) -> bool:
    """Whether ``folder`` is a results folder with a record for every attempt its manifest plans."""
    from clawgym_env.runner import load_attempts, load_manifest

    if not (folder / "manifest.json").is_file():
        return False
    m = load_manifest(folder)
    return len(load_attempts(folder)) == len(m.task_ids) * len(m.harnesses) * m.attempts


def evaluate(adapter: Path, out: Path, design: Design, e: Evaluation, seed: int) -> Path:
    """``clawgym bench run`` of ``adapter`` into ``out`` (skipped when complete, resumed when partial)."""
    if complete(out):
        return out
    cmd = bench_command(adapter, out, design, e, seed)
    print(f"$ {' '.join(cmd)}", flush=True)
    # the CLI of this checkout, in this interpreter (an installed ``clawgym`` script may belong to another checkout)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    subprocess.run([sys.executable, "-m", "clawgym_env.cli.main", *cmd[1:]], check=True, env=env)
    return out


def mean_score(folder: Path) -> float:
    from clawgym_env.runner import load_attempts

    attempts = load_attempts(folder)
    if not attempts:
        raise ConfigError(f"{folder}: no attempt recorded")
    return sum(a.score for a in attempts) / len(attempts)


def best_checkpoint(scores: dict[int, float]) -> int:
    """The step with the highest validation score; of equal scores the later (more training, same validation)."""
    return max(scores, key=lambda k: (scores[k], k))


def publish_adapter(source: Path, target: Path) -> Path:
    """Copy an adapter (its config and weights only) to ``target``, its base recorded portably (``base_name``)."""
    from clawgym_env.models.adapter import ADAPTER_CONFIG, adapter_base, base_name

    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    cfg = json.loads((source / ADAPTER_CONFIG).read_text())
    cfg["base_model_name_or_path"] = base_name(adapter_base(source))
    (tmp / ADAPTER_CONFIG).write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    shutil.copy2(source / "adapter_model.safetensors", tmp / "adapter_model.safetensors")
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return target
