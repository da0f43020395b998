"""Tree GRPO and PPO steps on the tiny MoE through the real Claude Code binary (``claude-code-bash``, in bwrap) and the
custom loop, with routing replay: the replayed tree reproduces the rollout, and its gradient is the per-call one."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from clawgym_env.models import tiny_moe_model_path
from clawgym_env.tree import pack_naive, pack_tree
from tests.trainers.conftest import make_config
from trainers.core.routing import RoutingReplay, load_balancing_loss
from trainers.tree_grpo.trainer import TreeGRPOTrainer

pytestmark = [pytest.mark.harness, pytest.mark.slow, pytest.mark.sandbox]


def needs_claude_code() -> None:
    from clawgym_env.harness_install import cache_root

    if not list((cache_root() / "harnesses").glob("anthropic-ai-claude-code-*")):
        pytest.fail("Claude Code is not installed; run `clawgym harness install claude-code`")


def per_call_gradient(group, adv: dict[str, float], coef: float) -> dict[str, torch.Tensor]:
    """Every call of ``group`` forwarded alone (sdpa, causal), with its own routing replayed; the load-balancing loss
    over all calls' rows; the gradient by parameter name."""
    model = AutoModelForCausalLM.from_pretrained(tiny_moe_model_path(), attn_implementation="sdpa")
    replay = RoutingReplay.attach(model)
    assert replay is not None
    naive = pack_naive(group.tree)
    logits: list[list[torch.Tensor]] = [[] for _ in replay.routers]
    chosen: list[list[torch.Tensor]] = [[] for _ in replay.routers]
    loss = torch.zeros(())
    for i, ref in enumerate(naive.refs):
        replay.load(naive.routing[i], replay=True)
        row = naive.row_logprobs(i, model(input_ids=naive.rows[i][None]).logits)
        loss = loss - (row * adv[ref.episode_id] * naive.loss_masks[i][naive.prompt_lens[i] :]).sum()
        for k in range(len(replay.routers)):
            logits[k].append(replay.logits[k])
            chosen[k].append(replay.chosen[k])
    replay.logits, replay.chosen = [torch.cat(x) for x in logits], [torch.cat(x) for x in chosen]
    (loss + coef * load_balancing_loss(replay, torch.ones(sum(int(r.shape[0]) for r in naive.rows)))).backward()
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def test_grpo_step_on_the_moe_through_claude_code_bash_and_custom(tmp_path: Path) -> None:
    needs_claude_code()
    cfg = make_config(
        tmp_path,
        harness="claude-code-bash,custom",
        mix_weights="1,1",
        pairs_per_step=2,
        num_generations=2,
        tasks="say-short",
        seed=1,
        crashed_episodes="penalize",
    )
    trainer = TreeGRPOTrainer(cfg, tiny_moe_model_path())
    batch = trainer.rollout()
    cc = [g for g in batch.groups if g.harness == "claude-code-bash"]
    assert cc, f"no Claude Code group was sampled or trainable: {[g.harness for g in batch.all_groups]}, {batch.skipped}"
    group = cc[0]
    pk = pack_tree(group.tree)
    assert pk.routing is not None and group.routing is not None and group.routing.shared_tokens > 1000
    # replay reproduces the rollout's logprobs on the tree of a real Claude Code episode (fp32, same weights)
    with torch.no_grad():
        lp = trainer.forward_logprobs(trainer.model, pk)
    assert float((lp - pk.rollout_logprobs)[pk.loss_mask].abs().max()) < 1e-5
    # tree gradient == per-call gradient, with replay and the load-balancing loss
    adv = {ep: (-1.0) ** i * (i + 1) for i, ep in enumerate(group.tree.episodes)}
    pk.set_advantages(adv)
    trainer.model.zero_grad()
    lp = trainer.forward_logprobs(trainer.model, pk)
    weights = pk.call_counts
    (
        -(lp * pk.advantages * pk.loss_mask).sum() + 0.01 * load_balancing_loss(trainer.routing_replays[id(trainer.model)], weights)
    ).backward()
    want = per_call_gradient(group, adv, 0.01)
    for n, p in trainer.policy.named_parameters():
        assert torch.allclose(p.grad, want[n], atol=1e-5, rtol=1e-4), n
    trainer.model.zero_grad()
    metrics = trainer.train_step(batch)
    assert metrics["mismatch/claude-code-bash"] < 1e-5 and metrics["mismatch/custom"] < 1e-5
    assert metrics["routing/topk_disagree"] == 0.0 and metrics["aux_loss"] > 0
    assert metrics["policy_version"] == 1.0 and metrics["grad_norm"] > 0


def test_ppo_step_on_the_moe_through_claude_code_bash(tmp_path: Path) -> None:
    from trainers.tree_ppo.config import TreePPOConfig
    from trainers.tree_ppo.trainer import TreePPOTrainer

    needs_claude_code()
    cfg = make_config(
        tmp_path,
        TreePPOConfig,
        harness="claude-code-bash",
        pairs_per_step=1,
        num_generations=2,
        tasks="say-short",
        seed=2,
        value_warmup_steps=1,
        crashed_episodes="penalize",
        crashed_reward=1.0,
        whiten_advantages=False,
    )
    trainer = TreePPOTrainer(cfg, tiny_moe_model_path())
    batch = trainer.rollout()
    assert [g.harness for g in batch.groups] == ["claude-code-bash"] and batch.groups[0].tree.num_trainable > 0
    assert pack_tree(batch.groups[0].tree).routing is not None
    warm = trainer.train_step(copy.deepcopy(batch))
    trainer.step += 1
    assert warm["value_warmup"] == 1.0 and warm["policy_version"] == 0.0 and warm["mismatch"] < 1e-5
    step = trainer.train_step(batch)
    assert step["value_warmup"] == 0.0 and step["policy_version"] == 1.0 and step["grad_norm"] > 0
    assert step["mismatch/claude-code-bash"] < 1e-5 and "mismatch_unreplayed" in step
