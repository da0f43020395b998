"""Loss pieces of tree GRPO and tree PPO as pure functions on tensors (testable on CPU with toys).

Tree layout: a packed tree has one row per *token*, but a token can be sampled by several
rollouts (identical continuations merge in the trie). The loss therefore works on *pairs*
``(token, rollout)``: ``PackedTree.sampler_token`` / ``sampler_rollout`` list one pair per call
that sampled a trainable token. A pair's loss uses its token's logprob (computed once, in one
forward) and its rollout's advantage, so the tree loss equals the per-call loss exactly, clipping
included, while each shared token is forwarded once.

What follows TRL 1.16 (``trl/trainer/grpo_trainer.py``), by definition rather than by import, and is
checked against TRL's own ``GRPOTrainer`` (``tests/trainers/test_trl_conformance.py``): group advantages
``(R - mean) / (std + 1e-4)`` (unbiased std, ``scale_rewards`` group/batch/none), the two-sided clipped
surrogate with ``epsilon_low``/``epsilon_high`` and optional ``delta``, the k3 KL estimator multiplied by
the ratio (gradient through both), the importance weights of served rollouts
(``vllm_importance_sampling_mode``: token or sequence, truncate or mask), and the normalisations of
``loss_type`` per micro-batch: ``grpo`` (mean over the micro-batch's sequences of each sequence's
token mean), ``bnpo`` (sum / the micro-batch's tokens), ``dr_grpo`` (sum / (the micro-batch's
sequences x max_completion_length)), each divided by the number of micro-batches, and ``dapo`` (sum /
tokens of the whole step). Here a *sequence* is a rollout (one episode: all its calls' sampled
tokens) and a micro-batch is a run of whole groups. Ours: the pair layout and the PPO pieces
(``A_t = R - V(s_t)``, gamma = lambda = 1, branches independent).
"""

from __future__ import annotations

import math
from typing import Literal

import torch

from clawgym_env.errors import ConfigError

__all__ = [
    "LOSS_TYPES",
    "LossType",
    "clipped_policy_loss",
    "group_advantages",
    "IS_MODES",
    "ISMode",
    "importance_weights",
    "kl_k3",
    "mismatch",
    "pair_weights",
    "ppo_advantages",
    "sequence_log_ratios",
    "value_loss",
]

LossType = Literal["grpo", "bnpo", "dr_grpo", "dapo"]
LOSS_TYPES: tuple[str, ...] = ("grpo", "bnpo", "dr_grpo", "dapo")
ScaleRewards = Literal["group", "batch", "none"]
ISMode = Literal["token_truncate", "token_mask", "sequence_truncate", "sequence_mask"]
IS_MODES: tuple[str, ...] = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


def group_advantages(
    rewards: torch.Tensor, groups: torch.Tensor | None = None, *, scale_rewards: ScaleRewards | bool = "group", eps: float = 1e-4
) -> torch.Tensor:
    """GRPO advantages ``(R_i - mean_g) / (std + eps)`` for every rollout ``i`` of group ``g``.

    ``groups`` holds each rollout's group index (None: one group). ``scale_rewards`` as TRL's:
    "group" divides by the group's std, "batch" by the std of all rewards, "none" only centres
    (Dr. GRPO). A group of one rollout gets advantage 0 (no baseline to compare with).
    """
    rewards = rewards.float()
    if groups is None:
        groups = torch.zeros(rewards.shape[0], dtype=torch.long)
    if isinstance(scale_rewards, bool):
        scale_rewards = "group" if scale_rewards else "none"
    if scale_rewards not in ("group", "batch", "none"):
        raise ConfigError(f"scale_rewards={scale_rewards!r}: use 'group', 'batch' or 'none'")
    adv = torch.zeros_like(rewards)
    for g in torch.unique(groups):
        sel = groups == g
        r = rewards[sel]
        if r.numel() < 2:
            continue
        centred = r - r.mean()
        if scale_rewards == "group":
            centred = centred / (r.std() + eps)
        adv[sel] = centred
    if scale_rewards == "batch" and rewards.numel() > 1:
        adv = adv / (rewards.std() + eps)
    return adv


def importance_weights(
    logp_old: torch.Tensor,
    logp_rollout: torch.Tensor,
    *,
    mode: ISMode | str = "token_truncate",
    clip_min: float | None = None,
    clip_max: float | None = 3.0,
    sequence_log_ratio: torch.Tensor | None = None,
    rollout: torch.Tensor | None = None,
) -> torch.Tensor:
    """TRL's importance weights of served rollouts, ``pi_train / pi_sampler`` per pair (no gradient).

    ``token_*``: ``exp(logp_old - logp_rollout)`` per token; ``sequence_*``: one ratio per rollout,
    ``exp`` of its summed log ratio (``sequence_log_ratio[rollout]``, from ``sequence_log_ratios``).
    ``*_truncate`` clamps to ``[clip_min, clip_max]``; ``*_mask`` sets ratios outside them to 0. A NaN
    rollout logprob (not captured) contributes a log ratio of 0, as in TRL.
    """
    if mode not in IS_MODES:
        raise ConfigError(f"vllm_importance_sampling_mode={mode!r}: set one of {list(IS_MODES)}")
    if mode.startswith("sequence"):
        if sequence_log_ratio is None or rollout is None:
            raise ConfigError(f"importance_weights: mode {mode!r} needs sequence_log_ratio and rollout")
        ratio = torch.exp(sequence_log_ratio.to(logp_old.device)[rollout.to(logp_old.device)])
    else:
        ratio = torch.exp(torch.nan_to_num((logp_old - logp_rollout).detach().float(), nan=0.0))
    if mode.endswith("truncate"):
        return torch.clamp(ratio, min=clip_min, max=clip_max)
    lo = -math.inf if clip_min is None else clip_min
    hi = math.inf if clip_max is None else clip_max
    return ratio.masked_fill((ratio < lo) | (ratio > hi), 0.0)


def sequence_log_ratios(logp_old: torch.Tensor, logp_rollout: torch.Tensor, rollout: torch.Tensor, num_rollouts: int) -> torch.Tensor:
    """``[R]`` summed ``logp_old - logp_rollout`` of each rollout's pairs (NaN counts 0); sum it over packs."""
    diff = torch.nan_to_num((logp_old - logp_rollout).detach().float(), nan=0.0)
    return torch.zeros(num_rollouts, dtype=torch.float32, device=diff.device).index_add(0, rollout.to(diff.device), diff)


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token KL(pi || ref) estimate ``exp(ref - logp) - (ref - logp) - 1`` (always >= 0)."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1


def clipped_policy_loss(
    logp: torch.Tensor,
    logp_old: torch.Tensor,
    advantages: torch.Tensor,
    *,
    epsilon_low: float = 0.2,
    epsilon_high: float | None = None,
    delta: float | None = None,
    is_weights: torch.Tensor | None = None,
    beta: float = 0.0,
    ref_logp: torch.Tensor | None = None,
    bias_correction_kl: bool = True,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Per-pair clipped surrogate ``-min(r A, clip(r, 1-eps_lo, 1+eps_hi) A) * w + beta KL``.

    All inputs are per pair ``(token, rollout)``. ``bias_correction_kl`` is TRL's
    ``use_bias_correction_kl`` (default True): the k3 term is multiplied by the ratio ``r`` *with*
    its gradient, which makes the KL gradient the unbiased reverse-KL one (it differs from plain
    k3 by ``beta * k3 * grad logp`` per token even on-policy, where ``r == 1``). Returns the per-pair
    loss and per-pair diagnostics (``ratio``, ``clipped`` as 0/1, ``kl``) for logging.
    """
    eps_hi = epsilon_low if epsilon_high is None else epsilon_high
    ratio = torch.exp(logp - logp_old)
    ratio_clipped = torch.clamp(ratio, 1 - epsilon_low, 1 + eps_hi)
    unclipped = torch.clamp(ratio, max=delta) if delta is not None else ratio
    loss = -torch.min(unclipped * advantages, ratio_clipped * advantages)
    if is_weights is not None:
        loss = loss * is_weights
    kl = torch.zeros_like(loss)
    if beta != 0.0:
        if ref_logp is None:
            raise ConfigError("beta != 0 needs reference logprobs; pass ref_logp or set beta=0.0")
        kl = kl_k3(logp, ref_logp)
        if bias_correction_kl:
            kl = kl * ratio  # the ratio carries gradient, as TRL 1.16's coef_1 does
        loss = loss + beta * kl
    clipped = ((ratio < 1 - epsilon_low) & (advantages < 0)) | ((ratio > 1 + eps_hi) & (advantages > 0))
    return loss, {"ratio": ratio.detach(), "clipped": clipped.float(), "kl": kl.detach()}


def pair_weights(
    loss_type: LossType | str,
    rollout: torch.Tensor,
    *,
    tokens_per_rollout: torch.Tensor,
    max_completion_length: int,
    micro_batch: torch.Tensor | None = None,
    num_micro_batches: int = 1,
) -> torch.Tensor:
    """Weight of each pair so that ``sum(loss * weight)`` over ALL packs is the step's loss, as TRL's.

    ``rollout`` holds each pair's global rollout index; ``tokens_per_rollout`` counts every
    rollout's pairs over the whole step (all packs; a rollout with none does not train);
    ``micro_batch`` gives each rollout's micro-batch (``gradient_accumulation_steps`` of them, default
    one). TRL normalises ``grpo``, ``bnpo`` and ``dr_grpo`` within each micro-batch and divides by the
    number of micro-batches, ``dapo`` by the tokens of the whole step. Packs can then be forwarded and
    back-propagated one at a time and still sum to TRL's loss.
    """
    counts = tokens_per_rollout.float()
    trains = counts > 0
    if not bool(trains.any()):
        raise ConfigError("pair_weights: no rollout to train on (every rollout has 0 tokens)")
    mb = torch.zeros(counts.shape[0], dtype=torch.long) if micro_batch is None else micro_batch.long()
    n = num_micro_batches
    sequences = torch.zeros(n).index_add(0, mb[trains], torch.ones(int(trains.sum())))
    tokens = torch.zeros(n).index_add(0, mb, counts)
    mine = mb[rollout]
    if loss_type == "grpo":
        return 1.0 / (counts[rollout] * sequences[mine] * n)
    if loss_type == "bnpo":
        return 1.0 / (tokens[mine] * n)
    if loss_type == "dapo":
        return torch.full(rollout.shape, 1.0 / float(counts.sum()))
    if loss_type == "dr_grpo":
        return 1.0 / (sequences[mine] * max_completion_length * n)
    raise ConfigError(f"loss_type={loss_type!r} is not supported by the tree trainers; use one of {list(LOSS_TYPES)}")


def mismatch(logp_train: torch.Tensor, logp_rollout: torch.Tensor, mask: torch.Tensor | None = None) -> float:
    """Mean ``|logp_train - logp_rollout|`` over sampled tokens: 0 means trainer and sampler agree exactly."""
    d = (logp_train.detach().float() - logp_rollout.float()).abs()
    if mask is not None:
        d = d[mask.bool()]
    d = d[~torch.isnan(d)]
    return float(d.mean()) if d.numel() else 0.0


def ppo_advantages(returns: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """PPO advantages with gamma = lambda = 1 and a terminal reward: ``A_t = R - V(s_t)`` per pair.

    With gamma = lambda = 1, GAE telescopes to the return minus the value of the state the
    token was sampled in; each branch of the tree is its own trajectory, so a state shared by
    several rollouts gets one advantage per rollout (one per pair).
    """
    return returns.float() - values.detach().float()


def value_loss(
    values: torch.Tensor,
    returns: torch.Tensor,
    weights: torch.Tensor | None = None,
    *,
    old_values: torch.Tensor | None = None,
    clip: float | None = None,
) -> torch.Tensor:
    """0.5 (V - R)^2 per pair, optionally clipped around ``old_values`` (PPO2-style), weighted sum or mean."""
    err = (values - returns) ** 2
    if clip is not None and old_values is not None:
        v_clipped = old_values + torch.clamp(values - old_values, -clip, clip)
        err = torch.max(err, (v_clipped - returns) ** 2)
    err = 0.5 * err
    return (err * weights).sum() if weights is not None else err.mean()
