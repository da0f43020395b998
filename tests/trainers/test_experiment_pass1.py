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


def test_quick_pipeline_runs_end_to_end_and_sft_raises_held_out_pass_at_1(tmp_path: Path) -> None:
    """SmolLM2 before SFT does not speak the tool-call format (Pass@1 ~0 on the held-out variants);
    a few tree-SFT steps on the expert captures must lift held-out Pass@1 above it."""
    from trainers.pass1 import STAGES
    from trainers.scripts import experiment_pass1

    meta = experiment_pass1.main(["--quick", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work")])
    assert set(meta["seconds"]) >= {"sft", "rl", "eval-before", "eval-after-sft", "eval-after-rl"}
    scores = {stage: _pass_at_1(tmp_path / "out" / stage) for stage in STAGES}  # every attempt has its record
    history = json.loads((tmp_path / "work" / "sft" / "final" / "sft_state.json").read_text())["log_history"]
    first, last = (sum(h["loss"] for h in part) / len(part) for part in (history[:3], history[-3:]))
    assert last < first, (first, last)
    assert scores["after-sft"] > scores["before"], scores
