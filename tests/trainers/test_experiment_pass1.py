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


def test_quick_pipeline_runs_end_to_end_and_sft_learns_the_expert_tokens(tmp_path: Path) -> None:
    """Not (yet) asserted: held-out Pass@1 after SFT above the start. At this size the scratch model
    learns the tool-call format but not the commands (measured Pass@1 0 at every stage; see
    /work/notes/issue-16.md), so the test asserts what the run does achieve."""
    from trainers.scripts import experiment_pass1

    meta = experiment_pass1.main(["--quick", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work")])
    assert set(meta["seconds"]) >= {"sft", "rl", "eval-before", "eval-after-sft", "eval-after-rl"}
    for stage in experiment_pass1.STAGES:
        _pass_at_1(tmp_path / "out" / stage)  # every held-out attempt has its record
    history = json.loads((tmp_path / "work" / "sft" / "final" / "sft_state.json").read_text())["log_history"]
    first, last = history[0]["loss"], sum(h["loss"] for h in history[-5:]) / 5
    assert last < first / 3, (first, last)
