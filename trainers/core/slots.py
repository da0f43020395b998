"""A step's packs as the loss sees them: each group's tree packed, its (token, rollout) pairs
numbered over the whole batch, and each rank's share of the packs."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import torch

from clawgym_env.tree import PackedTree, pack_trees
from trainers.core.distributed import balance_by_tokens, reduce_totals
from trainers.core.losses import mismatch
from trainers.rollout import Group, RolloutBatch

__all__ = ["PackSlot", "build_slots", "mismatch_metrics", "rank_share"]


@dataclass
class PackSlot:
    """One pack of a step and its pairs mapped onto the batch's global rollout numbering."""

    pack: PackedTree
    group: Group
    pair_token: torch.Tensor  # [P] token index in the pack
    pair_rollout: torch.Tensor  # [P] global rollout index
    old_logp: torch.Tensor | None = None  # [P] logprob at the first iteration (TRL's old_per_token_logps)
    advantages: torch.Tensor | None = None  # [P]
    extra: dict[str, torch.Tensor] = field(default_factory=dict)


def build_slots(batch: RolloutBatch, pack_max_tokens: int | None, branching: bool) -> tuple[list[PackSlot], list[tuple[int, str]]]:
    """Pack every trained group's tree; number rollouts globally as (group index, session id).

    A pair is (token, rollout): one per call that sampled the token, each with its rollout's
    advantage. With ``branching`` it is one per loss token (its first sampler's rollout), and
    ``extra`` holds the tree quantities its advantage comes from (``trainers.branching.token_values``):
    ``node_value`` (mean reward of the leaves under the token's node) and ``step_advantage``.
    """
    from trainers.branching import token_values

    rollouts: list[tuple[int, str]] = []
    index: dict[tuple[int, str], int] = {}
    out: list[PackSlot] = []
    for gi, group in enumerate(batch.groups):
        if group.tree is None:
            continue
        for ep in group.tree.episodes:
            index[(gi, ep)] = len(rollouts)
            rollouts.append((gi, ep))
        for pack in pack_trees(group.tree, pack_max_tokens):
            local = torch.tensor([index[(gi, r)] for r in pack.rollout_ids], dtype=torch.long)
            if not branching:
                out.append(PackSlot(pack, group, pack.sampler_token.clone(), local[pack.sampler_rollout]))
                continue
            tok = pack.loss_mask.nonzero().squeeze(1)
            value, adv = token_values(pack, group.tree, group.rewards)
            out.append(
                PackSlot(pack, group, tok, local[pack.rollout_index[tok]], extra={"node_value": value[tok], "step_advantage": adv[tok]})
            )
    return out, rollouts


def rank_share(accelerator: Any, slots: list[PackSlot], equal_counts: bool = False) -> tuple[list[PackSlot], int]:
    """The packs this rank forwards (its share, balanced by tokens) and how many of them are its own.

    The rest are zero-weight stand-ins (the smallest pack): a rank with no pack of its own forwards
    one, so every rank takes part in each gradient all-reduce; with ``equal_counts`` (a sharded
    policy, whose every forward all-gathers parameters) every rank forwards as many packs as the
    rank with the most.
    """
    if accelerator.num_processes == 1:
        return slots, len(slots)
    shares = balance_by_tokens([len(s.pack) for s in slots], accelerator.num_processes)
    mine = [slots[i] for i in shares[accelerator.process_index]]
    forwards = max(len(s) for s in shares) if equal_counts else max(1, len(mine))
    return mine + [min(slots, key=lambda s: len(s.pack))] * (forwards - len(mine)), len(mine)


def mismatch_metrics(accelerator: Any, pairs: list[tuple[PackSlot, torch.Tensor]]) -> dict[str, float]:
    """Mismatch and trainable tokens, overall and per harness, over every rank's packs."""
    total: dict[str, float] = defaultdict(float)
    for slot, lp in pairs:
        m = slot.pack.loss_mask.to(lp.device)
        n = float(m.sum())
        if not n:
            continue
        d = mismatch(lp[m].cpu(), slot.pack.rollout_logprobs[m.cpu()]) * n
        for key in ("mismatch", f"mismatch/{slot.group.harness}"):
            total[key] += d
            total["trainable_tokens" + key.removeprefix("mismatch")] += n
    total = reduce_totals(accelerator, total)
    out = {k: v / total["trainable_tokens" + k.removeprefix("mismatch")] for k, v in total.items() if k.startswith("mismatch")}
    out.update({k: v for k, v in total.items() if k.startswith("trainable_tokens")})
    out.setdefault("trainable_tokens", 0.0)
    return out
