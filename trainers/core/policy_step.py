"""One policy update of a tree trainer: ``num_iterations`` passes of the clipped, importance-weighted
loss over this rank's packs, one optimizer step per pass.

The loss itself is the pure functions of ``trainers.core.losses``; this module is the loop around them
(the step's micro-batches, DDP's no_sync, the KL reference forward, the step's metrics). As in TRL's
``GRPOTrainer`` with its default ``steps_per_generation``, a step's rollouts are one generation batch:
``gradient_accumulation_steps`` micro-batches of whole groups, normalised each as ``loss_type`` says,
and one optimizer step per pass over all of them. A pack whose pairs all have advantage 0 adds exactly
nothing to the loss or its gradient when there is no KL or load-balancing term, so it is not forwarded;
its tokens still count in every normaliser (TRL keeps zero-variance groups with advantage 0).
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from typing import TYPE_CHECKING

import torch

from trainers.core.distributed import reduce_totals
from trainers.core.losses import clipped_policy_loss, importance_weights, pair_weights, sequence_log_ratios
from trainers.core.routing import aux_loss
from trainers.core.slots import PackSlot, mismatch_metrics, rank_share

if TYPE_CHECKING:
    from trainers.core.engine import TreeTrainerBase

__all__ = ["micro_batches", "policy_update"]

_MEANS = ("loss", "grad_norm", "is_weight/mean", "clip_ratio", "kl")


def micro_batches(rollouts: list[tuple[int, str]], num_micro_batches: int) -> torch.Tensor:
    """``[R]`` micro-batch of each rollout: the step's groups in order, split into ``num_micro_batches`` even runs."""
    groups = sorted({gi for gi, _ in rollouts})
    rank = {g: i for i, g in enumerate(groups)}
    return torch.tensor([rank[gi] * num_micro_batches // len(groups) for gi, _ in rollouts], dtype=torch.long)


def _contributes(trainer: TreeTrainerBase, slot: PackSlot) -> bool:
    """Whether the pack can move the loss: a non-zero advantage, or a KL / load-balancing term."""
    assert slot.advantages is not None
    return trainer.config.beta != 0.0 or bool(trainer.router_aux_coef) or bool((slot.advantages != 0).any())


def _sequence_log_ratios(trainer: TreeTrainerBase, mine: list[PackSlot], own: int, num_rollouts: int) -> torch.Tensor:
    """Sequence-level importance sampling: each rollout's summed ``logp_old - logp_rollout`` over every rank's packs.

    A rollout's tokens may lie in several packs, so the old logprobs are taken first, without gradient (stand-ins
    too: a sharded policy's forwards are collective), and only this rank's own packs are summed."""
    acc = trainer.accelerator
    total = torch.zeros(num_rollouts, dtype=torch.float32, device=acc.device)
    with torch.no_grad():
        for j, s in enumerate(mine):
            s.old_logp = trainer.forward_logprobs(trainer.model, s.pack)[s.pair_token.to(acc.device)]
            if j < own:
                rollout_lp = s.pack.rollout_logprobs[s.pair_token].to(acc.device)
                total += sequence_log_ratios(s.old_logp, rollout_lp, s.pair_rollout, num_rollouts)
    return acc.reduce(total, reduction="sum") if acc.num_processes > 1 else total


def _zero_missing_grads(model: torch.nn.Module) -> None:
    """No pack was forwarded: the optimizer still steps on a zero gradient, as TRL's does."""
    for p in model.parameters():
        if p.requires_grad and p.grad is None:
            p.grad = torch.zeros_like(p)


def policy_update(trainer: TreeTrainerBase, slots: list[PackSlot], rollouts: list[tuple[int, str]]) -> dict[str, float]:
    """``num_iterations`` passes over this rank's packs, an optimizer step after each.

    The pair weights are the whole batch's (every rank holds it), so summing the ranks' losses
    gives the single-process loss; DDP averages gradients, hence the ``num_processes`` factor.
    Logged: the mean over passes of each metric (what TRL logs over the same optimizer steps) and,
    with ``num_iterations`` > 1, each pass's own (``loss/pass_<k>``, ...).
    """
    c, acc = trainer.config, trainer.accelerator
    counts = torch.zeros(len(rollouts), dtype=torch.long)
    for s in slots:
        counts.index_add_(0, s.pair_rollout, torch.ones_like(s.pair_rollout))
    micro = micro_batches(rollouts, c.gradient_accumulation_steps)
    active = [s for s in slots if _contributes(trainer, s)]
    mine, own = rank_share(acc, active, equal_counts=trainer.sharded) if active else ([], 0)
    mode = c.vllm_importance_sampling_mode
    correct = bool(c.vllm_importance_sampling_correction)
    seq_ratio = _sequence_log_ratios(trainer, mine, own, len(rollouts)) if correct and mode.startswith("sequence") else None
    passes: list[dict[str, float]] = []
    mism: dict[str, float] = {}
    for it in range(c.num_iterations):
        agg: dict[str, float] = defaultdict(float)
        first: list[tuple[PackSlot, torch.Tensor]] = []
        for j, s in enumerate(mine):
            stand_in = j >= own  # a zero-weight forward that keeps the ranks' collectives in step
            scale = 0.0 if stand_in else float(acc.num_processes)
            sync = contextlib.nullcontext() if j == len(mine) - 1 else acc.no_sync(trainer.model)
            with sync:
                lp = trainer.forward_logprobs(trainer.model, s.pack)
                if it == 0 and not stand_in:
                    first.append((s, lp.detach()))
                tok = s.pair_token.to(lp.device)
                logp = lp[tok]
                if s.old_logp is None:
                    s.old_logp = logp.detach()
                old = s.old_logp
                w = None
                if correct:
                    w = importance_weights(
                        old,
                        s.pack.rollout_logprobs[s.pair_token].to(lp.device),
                        mode=mode,
                        clip_min=c.vllm_importance_sampling_clip_min,
                        clip_max=c.vllm_importance_sampling_clip_max,
                        sequence_log_ratio=seq_ratio,
                        rollout=s.pair_rollout,
                    )
                ref = None
                if trainer.ref_model is not None:
                    with torch.no_grad():
                        ref = trainer.forward_logprobs(trainer.ref_model, s.pack)[tok]
                assert s.advantages is not None
                loss_pairs, diag = clipped_policy_loss(
                    logp,
                    old,
                    s.advantages.to(lp.device),
                    epsilon_low=c.epsilon,
                    epsilon_high=c.epsilon_high,
                    delta=c.delta,
                    is_weights=w,
                    beta=c.beta,
                    ref_logp=ref,
                    bias_correction_kl=c.use_bias_correction_kl,
                )
                weights = pair_weights(
                    c.loss_type,
                    s.pair_rollout,
                    tokens_per_rollout=counts,
                    max_completion_length=int(c.max_completion_length or 1),
                    micro_batch=micro,
                    num_micro_batches=c.gradient_accumulation_steps,
                ).to(lp.device)
                loss = (loss_pairs * weights).sum()
                if trainer.router_aux_coef:  # TRL's MoE load-balancing term, a mean over the step's packs
                    aux = aux_loss(trainer, s.pack)
                    loss = loss + aux * (trainer.router_aux_coef / len(slots))
                    if not stand_in:
                        agg["aux_loss"] += float(aux.detach()) / len(slots)
                acc.backward(loss * scale)
            if not stand_in:
                agg["loss"] += float(loss.detach())
                agg["is_weight_sum"] += float(w.sum()) if w is not None else float(len(logp))
                agg["clip_sum"] += float(diag["clipped"].sum())
                agg["kl_sum"] += float(diag["kl"].sum())
                agg["pairs"] += float(len(logp))
        if it == 0:
            mism = mismatch_metrics(acc, first)
        if not mine:
            _zero_missing_grads(trainer.model)
        grad_norm = acc.clip_grad_norm_(trainer.model.parameters(), c.max_grad_norm)
        trainer.optimizer.step()
        trainer.scheduler.step()
        trainer.optimizer.zero_grad(set_to_none=True)
        totals = reduce_totals(acc, agg)
        pairs = max(1.0, totals.get("pairs", 0.0))
        passes.append(
            {
                "loss": totals.get("loss", 0.0),
                "grad_norm": float(grad_norm),
                "is_weight/mean": totals.get("is_weight_sum", 0.0) / pairs,
                "clip_ratio": totals.get("clip_sum", 0.0) / pairs,
                "kl": totals.get("kl_sum", 0.0) / pairs,
                "aux_loss": totals.get("aux_loss", 0.0),
            }
        )
    out = {k: sum(p[k] for p in passes) / len(passes) for k in _MEANS}
    if len(passes) > 1:
        out.update({f"{k}/pass_{i}": p[k] for i, p in enumerate(passes) for k in _MEANS})
    out.update(
        {"learning_rate": trainer.scheduler.get_last_lr()[0], "rollouts_trained": float(int((counts > 0).sum())), "optimizer_step": 1.0}
    )
    if trainer.router_aux_coef:
        out["aux_loss"] = passes[0]["aux_loss"]
    out.update(mism)
    return out
