"""The CPU demo really learns: mean reward over its last steps beats its first steps (about 90 s)."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]


def test_demo_reward_rises(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    from trainers.scripts import demo_cpu

    rewards = demo_cpu.main(["--steps", "25", "--output-dir", str(tmp_path)])
    assert len(rewards) == 25
    first, last = sum(rewards[:5]) / 5, sum(rewards[-5:]) / 5
    assert last > first + 0.05, rewards
    assert "mean reward: first 5 steps" in capsys.readouterr().out
