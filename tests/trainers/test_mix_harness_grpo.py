"""One tree GRPO step mixing three real CLI harnesses (Codex, pi, OpenCode), through the TRL-shaped script.

Slow on CPU: six real harness episodes served by the tiny model in bwrap, then one optimizer step on the
three groups' trees. Each harness speaks its own wire format (Responses for Codex, Chat for pi and
OpenCode); the trainer sees only trees of exact token ids.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harnesses.conftest import require_installed

pytestmark = [pytest.mark.harness, pytest.mark.slow, pytest.mark.sandbox]

ROOT = Path(__file__).resolve().parents[2]
MIX = ("codex", "pi", "opencode")


def test_grpo_step_mixes_three_real_harnesses(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from trainers.scripts import train_grpo

    for name in MIX:
        require_installed(name)
    monkeypatch.chdir(ROOT)
    argv = [
        "--config",
        "trainers/recipes/toy_grpo.yaml",
        "--harness",
        ",".join(MIX),
        "--mix-weights",
        "1,1,1",
        "--tasks",
        "say-short",
        "--max_steps",
        "1",
        "--pairs_per_step",
        "3",
        "--num_generations",
        "2",
        "--save_steps",
        "0",
        "--seed",
        "0",
        "--report_to",
        "none",
        "--output_dir",
        str(tmp_path),
    ]
    script, cfg = train_grpo.make_parser().parse_args_and_config(argv)
    trainer = train_grpo.main(script, cfg)
    (step,) = trainer.history
    trained = {k.split("/", 1)[1] for k in step if k.startswith("mismatch/")}
    assert trained == set(MIX), step  # each harness contributed a trainable group to the one step
    assert all(step[f"mismatch/{h}"] < 1e-3 for h in MIX)  # the trainer's logprobs match the captured ones
    assert step["policy_version"] == 1.0 and step["grad_norm"] > 0
