"""A stage's model evaluated by ``clawgym bench run``, and whether an earlier results folder is that same run."""

from __future__ import annotations

import subprocess
from pathlib import Path

from clawgym_env.errors import ConfigError
from trainers.pass1.size import TEST_SUITE, Evaluation, Size, evaluations, harness_list

__all__ = ["check_reuse", "evaluate", "model_spec", "reusable"]


def model_spec(model: Path, size: Size) -> str:
    """The ``hf:`` spec every evaluation of ``model`` runs."""
    # episodes in flight are decoded as one batch; the custom agent gives up on a call after 600 s. The backend's
    # seed derives one per (session, call): `bench run --seed` would give every attempt the same samples
    return f"hf:{model}?max_batch={size.eval_concurrency}&seed={size.seed}"


def reusable(folder: Path, e: Evaluation, model: Path, size: Size) -> str | None:
    """Why ``folder`` is not the bench run that ``e`` of ``model`` would make (None: it is, and is complete).

    The runner's own test of "same run" (``run_differences``, what guards ``bench run`` into a used folder), plus the
    harness versions, which a manifest records and that test does not compare.
    """
    from clawgym_env.harness_registry import load_harness_class
    from clawgym_env.runner import RunConfig, import_object, load_attempts, load_manifest, run_differences

    if not (folder / "manifest.json").is_file():
        return f"no {folder / 'manifest.json'}"
    config = RunConfig(
        model=model_spec(model, size),
        harnesses=harness_list(size),
        suite=e.suite,
        tasks=e.tasks,
        attempts=e.attempts,
        max_tokens=size.max_tokens,
        temperature=e.temperature,
    )  # as `evaluate` runs it
    suite = import_object(config.worker).describe_suite(config)
    m = load_manifest(folder)
    wrong = []
    for field, (have, want) in run_differences(config, suite, m).items():
        if field == "task_ids":
            extra, missing = sorted(set(have) - set(want)), sorted(set(want) - set(have))
            wrong.append(f"task_ids differ (not in this run: {extra[:3]}, missing: {missing[:3]})")
        elif field == "sampling":
            wrong += [f"{k} {have.get(k)!r} (this run: {want.get(k)!r})" for k in sorted({*have, *want}) if have.get(k) != want.get(k)]
        else:
            wrong.append(f"{field} {have!r} (this run: {want!r})")
    versions = {h: load_harness_class(h).version for h in config.harnesses}
    if m.harnesses != versions:
        wrong.append(f"harness versions {m.harnesses!r} (this run: {versions!r})")
    if wrong:
        return "; ".join(wrong)
    done, expected = len(load_attempts(folder)), len(suite.tasks) * len(config.harnesses) * e.attempts
    return None if done == expected else f"{done} of {expected} attempts recorded"


def evaluate(
    stage: str,
    model: Path,
    out: Path,
    size: Size,
    *,
    suite: str = TEST_SUITE,
    tasks: str | None = None,
    attempts: int = 1,
    temperature: float | None = None,
) -> Path:
    """Stage 5: ``clawgym bench run`` of ``model`` on the held-out variants (or ``suite``/``tasks``) into ``out``."""
    temperature = size.eval_temperature if temperature is None else temperature
    cmd = [
        "clawgym",
        "bench",
        "run",
        "--model",
        model_spec(model, size),
        "--harness",
        size.harnesses,
        "--suite",
        suite,
        "--tasks",
        tasks or size.test_tasks,
        "-k",
        str(attempts),
        "--concurrency",
        str(size.eval_concurrency),
        "--max-tokens",
        str(size.max_tokens),
        "--temperature",
        str(temperature),
        "--out",
        str(out),
        "--no-progress",
    ]
    print(f"[{stage}] $ {' '.join(cmd)}", flush=True)
    subprocess.run(cmd, check=True)
    return out


def check_reuse(reuse_before: Path | None, model: Path, size: Size) -> dict[str, Path]:
    """The before-SFT evaluations to copy (name -> folder of ``reuse_before``); a ConfigError if any is not this run's."""
    if reuse_before is None:
        return {}
    names = {}
    for e in evaluations(size):
        if e.stage == "before":
            why = reusable(reuse_before / e.name, e, model, size)
            if why is not None:
                raise ConfigError(
                    f"--reuse-before {reuse_before}: {e.name} is not this run's evaluation: {why}; drop --reuse-before to run it"
                )
            names[e.name] = reuse_before / e.name
    return names
