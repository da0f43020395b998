"""One tree GRPO step through the real Claude Code binary (in bwrap), mixed with the custom loop.

Slow on CPU: Claude Code's ~30k-token prompt (tiny tokenizer) makes a ~30k-token tree, and the
dense tree mask forward/backward of it takes minutes on two cores.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.trainers.conftest import make_config
from trainers.tree_grpo.trainer import TreeGRPOTrainer

pytestmark = [pytest.mark.harness, pytest.mark.slow, pytest.mark.sandbox]


def test_grpo_step_through_claude_code_and_custom(tiny_path: Path, tmp_path: Path) -> None:
    from clawgym_env.harness_install import cache_root

    if not list((cache_root() / "harnesses").glob("anthropic-ai-claude-code-*")):
        pytest.fail("Claude Code is not installed; run `clawgym harness install claude-code`")
    cfg = make_config(
        tmp_path,
        harness="claude-code,custom",
        mix_weights="1,1",
        pairs_per_step=2,
        num_generations=2,
        tasks="say-short",
        seed=1,
        crashed_episodes="penalize",
        beta=0.04,  # a KL term: every pack is forwarded, so mismatch is measured on each harness (equal rewards give advantage 0)
    )  # the random tiny model makes Claude Code exit 1 (every call hits max tokens)
    trainer = TreeGRPOTrainer(cfg, tiny_path)
    batch = trainer.rollout()
    harnesses = {g.harness for g in batch.all_groups}
    cc = [g for g in batch.groups if g.harness == "claude-code"]
    assert cc, f"no Claude Code group was sampled or trainable: {harnesses}, skipped={batch.skipped}"
    assert cc[0].tree is not None and cc[0].tree.num_trainable > 0 and cc[0].versions == {0}
    metrics = trainer.train_step(batch)
    assert metrics["mismatch/claude-code"] < 1e-3
    assert metrics["policy_version"] == 1.0 and metrics["grad_norm"] > 0


def test_ppo_warmup_and_policy_step_through_claude_code(tiny_path: Path, tmp_path: Path) -> None:
    import copy

    from trainers.tree_ppo.config import TreePPOConfig
    from trainers.tree_ppo.trainer import TreePPOTrainer

    cfg = make_config(
        tmp_path,
        TreePPOConfig,
        harness="claude-code",
        pairs_per_step=1,
        num_generations=2,
        tasks="say-short",
        seed=2,
        value_warmup_steps=1,
        crashed_episodes="penalize",
        crashed_reward=1.0,  # as above; a return V has not fit yet
        whiten_advantages=False,
    )  # so A = R - V(s_t) is not whitened to 0 when every return is equal
    trainer = TreePPOTrainer(cfg, tiny_path)
    batch = trainer.rollout()
    assert [g.harness for g in batch.groups] == ["claude-code"] and batch.groups[0].tree.num_trainable > 0
    warm = trainer.train_step(copy.deepcopy(batch))
    trainer.step += 1
    assert warm["value_warmup"] == 1.0 and warm["policy_version"] == 0.0 and warm["mismatch"] < 1e-3
    step = trainer.train_step(batch)
    assert step["value_warmup"] == 0.0 and step["policy_version"] == 1.0 and step["grad_norm"] > 0
    assert step["mismatch/claude-code"] < 1e-3
