"""Mixture-of-experts policies with routing replay (R3): captures of the tiny MoE through the real custom harness
(bwrap sandbox, in-process HF backend), replayed per call and on prefix trees."""

from __future__ import annotations

import asyncio
import copy
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM

from clawgym_env.capture import CallRecord
from clawgym_env.errors import ConfigError
from clawgym_env.models import tiny_model_path, tiny_moe_model_path
from clawgym_env.proxy.backends.base import CompletionRequest
from clawgym_env.proxy.backends.hf import HFBackend
from clawgym_env.tree import build_forest, pack_naive, pack_tree
from clawgym_env.tree.routing import route_tree
from tests.trainers.conftest import SUITE, make_config
from trainers.core.logprobs import pack_logprobs
from trainers.core.routing import RoutingReplay, load_balancing_loss
from trainers.tree_grpo.trainer import TreeGRPOTrainer

pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def moe_batch() -> Any:
    """One step's rollouts of the tiny MoE (2 groups x 4 episodes of say-short, custom harness), version 0."""
    from clawgym_env._sync import run_sync
    from clawgym_env.task import load_suite
    from trainers.rollout import collect, tree_filters

    backend = HFBackend(tiny_moe_model_path(), seed=0)
    batch = collect(
        [load_suite(SUITE).get("say-short")],
        ["custom"],
        [1.0],
        backend,
        pairs_per_step=2,
        num_generations=4,
        rng=random.Random(0),
        filters=tree_filters(drop_retries=True, max_leaves=None, exclude_subagents=False),
        policy_version=0,
        skip_zero_variance=False,
        sampling={"max_tokens": 16, "temperature": 1.0},
    )
    run_sync(backend.aclose())
    return batch


def policy(path: Path | None = None) -> tuple[Any, RoutingReplay]:
    model = AutoModelForCausalLM.from_pretrained(path or tiny_moe_model_path(), attn_implementation="eager").eval()
    replay = RoutingReplay.attach(model)
    assert replay is not None
    return model, replay


def tree_logprobs(model: Any, replay: RoutingReplay, pack: Any, *, use: bool) -> torch.Tensor:
    replay.load(pack.routing, replay=use)
    return pack_logprobs(model, pack, mask_kind="additive", device="cpu", dtype=torch.float32)


def test_replay_reproduces_the_rollout_logprobs_per_call_and_on_the_tree(moe_batch: Any) -> None:
    """Same weights, fp32 on both sides: replaying the captured routing gives the rollout's logprobs within 1e-5,
    on the packed tree of each group and on each call forwarded alone, and the experts used are the recorded ones."""
    model, replay = policy()
    assert moe_batch.metrics["routing/shared_tokens"] > 0
    for group in moe_batch.groups:
        pk = pack_tree(group.tree)
        assert pk.routing is not None and (pk.routing[pk.loss_mask] >= 0).any()
        with torch.no_grad():
            lp = tree_logprobs(model, replay, pk, use=True)
        assert float((lp - pk.rollout_logprobs)[pk.loss_mask].abs().max()) < 1e-5
        for layer, chosen in enumerate(replay.chosen):
            rec = pk.routing[:, layer]
            assert bool(((chosen.sort(-1).values == rec.sort(-1).values) | (rec < 0)).all())
        naive = pack_naive(group.tree)
        for i in range(len(naive.rows)):
            replay.load(naive.routing[i], replay=True)
            with torch.no_grad():
                row = naive.row_logprobs(i, model(input_ids=naive.rows[i][None]).logits)
            want = naive.rollout_logprobs[i][naive.prompt_lens[i] :]
            assert float((row - want).abs().max()) < 1e-5


def perturbed_router_model(tmp_path: Path, scale: float) -> Path:
    """A copy of the tiny MoE whose routers' weights carry noise of std ``scale``: a sampler that picks experts
    differently at near-ties (other kernels), with everything else equal."""
    out = tmp_path / "sampler"
    shutil.copytree(tiny_moe_model_path(), out)
    model, replay = policy(out)
    gen = torch.Generator().manual_seed(1)
    for r in replay.routers:
        r.module.weight.data += scale * torch.randn(r.module.weight.shape, generator=gen)
    model.save_pretrained(out)
    return out


def sampled_group(path: Path) -> list[list[CallRecord]]:
    """2 episodes x 2 calls of 300-token prompts (the second extends the first), sampled by the HF backend on ``path``."""
    backend = HFBackend(path, seed=0)

    async def episode(e: int) -> list[CallRecord]:
        prompt = torch.randint(20, 300, (300,), generator=torch.Generator().manual_seed(0)).tolist()
        calls = []
        for i in range(2):
            c = await backend.handle(CompletionRequest(f"ep{e}", i, prompt, [], max_tokens=32, seed=100 * e + i))
            calls.append(
                CallRecord(
                    session_id=f"ep{e}",
                    call_index=i,
                    dialect="anthropic",
                    prompt_ids=prompt,
                    completion_ids=c.completion_ids,
                    logprobs=c.logprobs,
                    routing=c.routing,
                )
            )
            prompt = prompt + c.completion_ids + [7 + e, 8, 9 + i]
        return calls

    async def run() -> list[list[CallRecord]]:
        try:
            return list(await asyncio.gather(episode(0), episode(1)))
        finally:
            await backend.aclose()

    return asyncio.run(run())


def test_rollout_and_trainer_route_differently_and_replay_closes_the_gap(tmp_path: Path) -> None:
    """The sampler's routers carry noise of std 1e-3 (the routers' weights have std 0.02): without replay ~9% of the
    tokens get another top-k in the trainer and the logprob gap is large (max ~3e-2); with replay every token uses the
    recorded experts and the gap falls to what the sampler's perturbed gate weights leave (max ~4e-4)."""
    eps = sampled_group(perturbed_router_model(tmp_path, 1e-3))
    tree, _ = route_tree(build_forest(eps), [c for ep in eps for c in ep])
    pk = pack_tree(tree)
    model, replay = policy()
    gaps = {}
    for use in (False, True):
        with torch.no_grad():
            lp = tree_logprobs(model, replay, pk, use=use)
        gaps[use] = (lp - pk.rollout_logprobs)[pk.loss_mask].abs()
        tally = replay.take_tally()
        used = [
            ((c.sort(-1).values != pk.routing[:, k].sort(-1).values).any(-1) & (pk.routing[:, k] >= 0).all(-1)).sum()
            for k, c in enumerate(replay.chosen)
        ]
        if use:
            assert sum(int(u) for u in used) == 0  # every recorded token went through its recorded experts
        else:
            assert tally["differ"] / tally["tokens"] > 0.02 and sum(int(u) for u in used) > 0
    assert float(gaps[False].max()) > 1e-2
    assert float(gaps[True].max()) < 1e-3 and float(gaps[True].mean()) < float(gaps[False].mean()) / 5


def test_tree_gradient_equals_the_per_call_gradient_with_replay(moe_batch: Any) -> None:
    """Advantage-weighted logprobs plus the load-balancing loss, replayed: one packed forward per tree gives the
    gradient of every call forwarded alone (the aux loss over the calls' rows concatenated), the routers' included."""
    model, replay = policy()
    model.train()
    group = moe_batch.groups[0]
    adv = {ep: (-1.0) ** i * (i + 1) for i, ep in enumerate(group.tree.episodes)}
    pk = pack_tree(group.tree)
    pk.set_advantages(adv)
    model.zero_grad()
    lp = tree_logprobs(model, replay, pk, use=True)
    (-(lp * pk.advantages * pk.loss_mask).sum() + 0.01 * load_balancing_loss(replay, pk.call_counts)).backward()
    tree_grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
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
    replay.logits = [torch.cat(x) for x in logits]
    replay.chosen = [torch.cat(x) for x in chosen]
    rows = sum(int(r.shape[0]) for r in naive.rows)
    (loss + 0.01 * load_balancing_loss(replay, torch.ones(rows))).backward()
    assert any("gate" in n for n in tree_grads) and all(float(g.abs().max()) > 0 for n, g in tree_grads.items() if "gate" in n)
    for n, p in model.named_parameters():
        assert torch.allclose(tree_grads[n], p.grad, atol=1e-5, rtol=1e-4), n


def test_grpo_step_replays_and_logs_the_mismatch_with_and_without_replay(moe_batch: Any, tmp_path: Path) -> None:
    trainer = TreeGRPOTrainer(make_config(tmp_path), tiny_moe_model_path())
    assert trainer.router_aux_coef == 0.001  # TRL's rule: router_aux_loss_coef=None takes the model config's
    metrics = trainer.train_step(copy.deepcopy(moe_batch))
    assert metrics["mismatch"] < 1e-5 and metrics["mismatch_unreplayed"] < 1e-5  # same weights and precision
    assert metrics["routing/topk_disagree"] == 0.0 and metrics["routing/shared_disagree"] == 0.0
    assert metrics["aux_loss"] > 0 and metrics["policy_version"] == 1.0 and metrics["grad_norm"] > 0
    # the rollout side now samples with the new weights, and its captures still hold the routing
    assert trainer.backend.routing is not None


def test_router_aux_loss_coef_follows_trl(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a mixture-of-experts model"):
        TreeGRPOTrainer(make_config(tmp_path, router_aux_loss_coef=0.01), tiny_model_path())
    assert TreeGRPOTrainer(make_config(tmp_path, router_aux_loss_coef=0.0), tiny_moe_model_path()).router_aux_coef == 0.0
    with pytest.raises(ConfigError, match="drop --branching"):
        TreeGRPOTrainer(make_config(tmp_path, branching=True), tiny_moe_model_path())


def test_a_routing_that_does_not_fit_the_model_is_refused() -> None:
    _, replay = policy()
    with pytest.raises(ConfigError, match="another model than the trainer"):
        replay.load(torch.zeros(5, 3, 2, dtype=torch.long), replay=True)
    with pytest.raises(ConfigError, match="names expert 9"):
        replay.load(torch.full((5, 2, 2), 9, dtype=torch.long), replay=True)


def test_activation_checkpointing_recomputes_with_the_replayed_routing(moe_batch: Any, tmp_path: Path) -> None:
    """The backward's recomputed forward must route as the forward did: a trainer whose routers differ from the
    sampler's (so replay changes the routing) gets the same step with and without activation checkpointing."""
    sampler_view = perturbed_router_model(tmp_path, 1e-3)  # the trainer starts from other routers than the sampler's
    runs = []
    for ckpt in (False, True):
        trainer = TreeGRPOTrainer(make_config(tmp_path / str(ckpt), activation_checkpointing=ckpt), sampler_view)
        runs.append(trainer.train_step(copy.deepcopy(moe_batch)))
    assert runs[0]["routing/topk_disagree"] > 0  # replay does change the routing here
    assert runs[0]["grad_norm"] == pytest.approx(runs[1]["grad_norm"], rel=1e-5)
    assert runs[0]["loss"] == pytest.approx(runs[1]["loss"], rel=1e-5, abs=1e-7)
