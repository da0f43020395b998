"""The Pass@1 experiment end to end at its --quick size: build, expert capture, tree SFT, tree GRPO,
and `clawgym bench run` on the held-out procgen variants before SFT, after SFT and after RL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]


def _pass_at_1(folder: Path) -> float:
    records = [json.loads(p.read_text()) for p in (folder / "attempts").rglob("*.json")]
    assert records, f"{folder}: no attempt records"
    return sum(r.get("status") == "passed" for r in records) / len(records)


def test_quick_pipeline_sft_beats_the_starting_model(tmp_path: Path) -> None:
    from trainers.scripts import experiment_pass1

    meta = experiment_pass1.main(["--quick", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work")])
    stages = {s: _pass_at_1(tmp_path / "out" / s) for s in experiment_pass1.STAGES}
    assert stages["after-sft"] > stages["before"], stages
    assert set(meta["seconds"]) >= {"sft", "rl", "eval-before", "eval-after-sft", "eval-after-rl"}
