"""The transfer experiment's quick form end to end: the published SFT adapter, tree GRPO through the real ``custom``
harness with true and with shuffled rewards, every test evaluation a real ``clawgym bench run``, the analysis."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainers.scripts.experiment_transfer import main
from trainers.transfer.design import Design

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]

MARGIN = 0.125
"""Held-out-variant Pass@1 points (as a fraction) by which RL must lead the shuffled-reward control."""


def test_rl_keeps_what_shuffled_credit_loses_on_held_out_variants(tmp_path: Path) -> None:
    """Both RL arms take the same number and size of updates on the same kind of groups (append-line, rename-file:
    each reward needs one specific command); only which rollout gets which reward differs. With the true credit the
    held-out variants of those templates keep (or raise) their sampled success; with shuffled credit they must end lower
    by a clear margin. An RL that took no update fails the KL check; one whose credit were noise or inverted, the margin."""
    out = tmp_path / "quick"
    results = main(["--quick", "--out", str(out)])["analysis"]
    steps = Design.quick().rl.steps
    rows = {r["arm"]: r for r in results["pass_at_1"] if r["mode"] == "t1" and r["harness"] == "custom"}
    assert set(rows) == {"sft", "rl", "rl-shuffled"}
    rl, shuffled = rows["rl"]["variants"], rows["rl-shuffled"]["variants"]
    assert rl >= shuffled + MARGIN, f"held-out variants: rl {rl:.3f}, rl-shuffled {shuffled:.3f}, sft {rows['sft']['variants']:.3f}"
    for arm in ("rl", "rl-shuffled"):
        history = json.loads((out / "records" / arm / "seed0" / "history.json").read_text())
        assert [h["step"] for h in history] == list(range(1, steps + 1)) and history[-1]["kl"] > 0  # real updates moved it
        assert (out / "curves" / f"{arm}.png").stat().st_size > 0
        assert (out / "adapters" / arm / "seed0" / "adapter_model.safetensors").is_file()
    manifest = json.loads((out / "records" / "rl" / "seed0" / "test-t1" / "manifest.json").read_text())
    assert manifest["suite"] == "procgen-test"
    assert "rl" in (out / "results.md").read_text()
