"""What ``clawgym bench run`` shows when no model is named: the embedded model as shipped beside the same model
with the LoRA adapter this project trained, on held-out tasks, so a first run ends on a table that says it works.

The adapter (``ADAPTER``, a few MB in the package) was trained by the project's own pipeline on expert episodes of
``procgen-train``; ``SUITE``/``TASKS`` are held-out variants of the same one-command shell tasks (other parameters,
other files). How it was trained and what it scored: ``ADAPTER / "README.md"``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from clawgym_env.errors import ConfigError
from clawgym_env.runner.config import RunConfig, RunSummary
from clawgym_env.runner.run import default_out, run_benchmark

__all__ = ["ADAPTER", "HARNESS", "MAX_TOKENS", "SUITE", "TASKS", "first_run_models", "run_models"]

ADAPTER = Path(__file__).resolve().parents[1] / "models" / "adapters" / "smollm2-procgen"
"""The LoRA adapter on the embedded SmolLM2-135M-Instruct (``--model default?adapter=ADAPTER``)."""
SUITE = "procgen-test"
TASKS = "*-01"
"""One held-out variant of each of the 13 templates."""
HARNESS = "custom"
MAX_TOKENS = 64
"""A one-command answer fits; the base model's rambling is cut here instead of at the harness's own cap."""


def first_run_models(adapter: Path = ADAPTER) -> dict[str, str]:
    """Results-folder name -> model spec: the embedded model as shipped, then with ``adapter``."""
    if not (adapter / "adapter_config.json").is_file():
        raise ConfigError(
            f"the trained adapter is missing from this install ({adapter}); reinstall ClawGym, or name a "
            "model: clawgym bench run --model default"
        )
    return {"base": "default", "adapter": f"default?adapter={adapter}"}


async def run_models(config: RunConfig, models: dict[str, str], *, progress: bool = True) -> dict[str, RunSummary]:
    """``config`` run once per model, each into ``<config.out>/<name>`` (default out: runs/<timestamp>/)."""
    out = Path(config.out) if config.out else default_out()
    summaries: dict[str, RunSummary] = {}
    for name, model in models.items():
        summaries[name] = await run_benchmark(dataclasses.replace(config, model=model, out=str(out / name)), progress=progress)
    return summaries
