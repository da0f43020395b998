"""One policy update of a tree trainer: ``num_iterations`` passes of the clipped, importance-weighted
loss over this rank's packs, with an optimizer step each time gradients are synced.

The loss itself is the pure functions of ``trainers.core.losses``; this module is the loop around them
(accumulation, DDP's no_sync, the KL reference forward, the step's metrics).
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from typing import TYPE_CHECKING

import torch

from trainers.core.distributed import reduce_totals
from trainers.core.losses import clipped_policy_loss, pair_weights, truncated_is_weights
from trainers.core.routing import aux_loss
from trainers.core.slots import PackSlot, mismatch_metrics, rank_share

if TYPE_CHECKING:
    from trainers.core.engine import TreeTrainerBase

__all__ = ["policy_update"]


def policy_update(trainer: TreeTrainerBase, slots: list[PackSlot], rollouts: list[tuple[int, str]]) -> dict[str, float]:
    """``num_iterations`` passes over this rank's packs; an optimizer step once gradients are synced.

    The pair weights are the whole batch's (every rank holds it), so summing the ranks' losses
    gives the single-process loss; DDP averages gradients, hence the ``num_processes`` factor.
    """
    c, acc = trainer.config, trainer.accelerator
    counts = torch.zeros(len(rollouts), dtype=torch.long)
    for s in slots:
        counts.index_add_(0, s.pair_rollout, torch.ones_like(s.pair_rollout))
    num_rollouts = int((counts > 0).sum())
    mine, own = rank_share(acc, slots, equal_counts=trainer.sharded)
    agg: dict[str, float] = defaultdict(float)
    mism: dict[str, float] = {}
    stepped = False
    with acc.accumulate(trainer.model):
        for it in range(c.num_iterations):
            first: list[tuple[PackSlot, torch.Tensor]] = []
            for j, s in enumerate(mine):
                stand_in = j >= own  # a zero-weight forward that keeps the ranks' collectives in step
                scale = 0.0 if stand_in else float(acc.num_processes)
                sync = contextlib.nullcontext() if j == len(mine) - 1 else acc.no_sync(trainer.model)
                with sync:
                    lp = trainer.forward_logprobs(trainer.model, s.pack)
                    if it == 0 and not stand_in:
                        first.append((s, lp.detach()))
                    logp = lp[s.pair_token.to(lp.device)]
                    if s.old_logp is None:
                        s.old_logp = logp.detach()
                    old = s.old_logp
                    rollout_lp = s.pack.rollout_logprobs[s.pair_token].to(lp.device)
                    w = truncated_is_weights(old, rollout_lp, c.is_cap)
                    ref = None
                    if trainer.ref_model is not None:
                        with torch.no_grad():
                            ref = trainer.forward_logprobs(trainer.ref_model, s.pack)[s.pair_token.to(lp.device)]
                    assert s.advantages is not None
                    loss_pairs, diag = clipped_policy_loss(
                        logp, old, s.advantages.to(lp.device), epsilon_low=c.epsilon, epsilon_high=c.epsilon_high,
                        delta=c.delta, is_weights=w, beta=c.beta, ref_logp=ref,
                        bias_correction_kl=c.use_bias_correction_kl,
                    )
                    weights = pair_weights(c.loss_type, s.pair_rollout, tokens_per_rollout=counts, num_rollouts=num_rollouts,
                                           max_completion_length=int(c.max_completion_length or 1)).to(lp.device)
                    loss = (loss_pairs * weights).sum()
                    if trainer.router_aux_coef:  # TRL's MoE load-balancing term, a mean over the step's packs
                        aux = aux_loss(trainer, s.pack)
                        loss = loss + aux * (trainer.router_aux_coef / len(slots))
                        if it == 0 and not stand_in:
                            agg["aux_loss"] += float(aux.detach()) / len(slots)
                    acc.backward(loss * scale)
                if it == 0 and not stand_in:
                    agg["loss"] += float(loss.detach())
                    agg["is_weight_sum"] += float(w.sum())
                    agg["clip_sum"] += float(diag["clipped"].sum())
                    agg["kl_sum"] += float(diag["kl"].sum())
                    agg["pairs"] += float(len(logp))
            if it == 0:
                mism = mismatch_metrics(acc, first)
            if acc.sync_gradients:
                grad_norm = acc.clip_grad_norm_(trainer.model.parameters(), c.max_grad_norm)
                trainer.optimizer.step()
                trainer.scheduler.step()
                trainer.optimizer.zero_grad(set_to_none=True)
                stepped = True
                if it == 0:
                    agg["grad_norm"] = float(grad_norm)
    agg = reduce_totals(acc, agg)
    pairs = max(1.0, agg.pop("pairs", 0.0))
    out = {"loss": agg.get("loss", 0.0), "grad_norm": agg.get("grad_norm", 0.0) / acc.num_processes,
           "is_weight/mean": agg.get("is_weight_sum", 0.0) / pairs, "clip_ratio": agg.get("clip_sum", 0.0) / pairs,
           "kl": agg.get("kl_sum", 0.0) / pairs, "learning_rate": trainer.scheduler.get_last_lr()[0],
           "rollouts_trained": float(num_rollouts), "optimizer_step": float(stepped)}
    if trainer.router_aux_coef:
        out["aux_loss"] = agg.get("aux_loss", 0.0)
    out.update(mism)
    return out
