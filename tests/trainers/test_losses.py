"""Loss pieces on toy tensors: group advantages, importance weights, clipping, TRL normalisations, PPO."""

from __future__ import annotations

import pytest
import torch

from clawgym_env.errors import ConfigError
from trainers.core.losses import (
    clipped_policy_loss,
    group_advantages,
    importance_weights,
    kl_k3,
    mismatch,
    pair_weights,
    ppo_advantages,
    sequence_log_ratios,
    value_loss,
)


def test_group_advantages_are_standardised_within_each_group() -> None:
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 5.0, 5.0, 6.0])
    groups = torch.tensor([0, 0, 0, 0, 1, 1, 1])
    adv = group_advantages(rewards, groups)
    g0 = rewards[:4]
    assert torch.allclose(adv[:4], (g0 - g0.mean()) / (g0.std() + 1e-4))
    assert abs(float(adv[4:].sum())) < 1e-5 and adv[6] > 0 > adv[4]
    # zero-variance group: all zeros; "none" only centres (Dr. GRPO)
    assert torch.all(group_advantages(torch.ones(4)) == 0)
    assert torch.allclose(group_advantages(rewards[:4], scale_rewards="none"), g0 - g0.mean())
    with pytest.raises(ConfigError, match="scale_rewards"):
        group_advantages(rewards, scale_rewards="bogus")  # type: ignore[arg-type]


def test_token_importance_weights_truncate_or_mask_and_ignore_nan() -> None:
    old = torch.tensor([-1.0, -1.0, -1.0, -1.0])
    roll = torch.tensor([-1.0, -3.0, -0.5, float("nan")])
    e = float(torch.exp(torch.tensor(-0.5)))
    w = importance_weights(old, roll, mode="token_truncate", clip_max=2.0)
    assert torch.allclose(w, torch.tensor([1.0, 2.0, e, 1.0]))
    w = importance_weights(old, roll, mode="token_truncate", clip_min=0.8, clip_max=2.0)
    assert torch.allclose(w, torch.tensor([1.0, 2.0, 0.8, 1.0]))
    w = importance_weights(old, roll, mode="token_mask", clip_min=0.8, clip_max=2.0)
    assert torch.allclose(w, torch.tensor([1.0, 0.0, 0.0, 1.0]))
    with pytest.raises(ConfigError, match="vllm_importance_sampling_mode='token'"):
        importance_weights(old, roll, mode="token")


def test_sequence_importance_weights_use_each_rollouts_summed_log_ratio() -> None:
    """TRL's sequence_* modes: one ratio per sequence, exp of the summed per-token log ratios (here over packs)."""
    old = torch.tensor([-1.0, -1.0, -2.0, -1.0])
    roll = torch.tensor([-1.5, -1.2, -2.0, float("nan")])
    rollout = torch.tensor([0, 0, 1, 1])
    seq = sequence_log_ratios(old[:1], roll[:1], rollout[:1], 2) + sequence_log_ratios(old[1:], roll[1:], rollout[1:], 2)
    assert torch.allclose(seq, torch.tensor([0.7, 0.0]))
    w = importance_weights(old, roll, mode="sequence_truncate", clip_max=1.5, sequence_log_ratio=seq, rollout=rollout)
    assert torch.allclose(w, torch.tensor([1.5, 1.5, 1.0, 1.0]))
    w = importance_weights(old, roll, mode="sequence_mask", clip_max=1.5, sequence_log_ratio=seq, rollout=rollout)
    assert torch.allclose(w, torch.tensor([0.0, 0.0, 1.0, 1.0]))


def test_clipped_loss_matches_definition_and_clips_one_side_per_sign() -> None:
    logp = torch.tensor([0.0, 0.0, 0.0, 0.0], requires_grad=True)
    old = torch.log(torch.tensor([1.0, 0.5, 2.0, 0.5]))  # ratios 1, 2, 0.5, 2
    adv = torch.tensor([1.0, 1.0, -1.0, -1.0])
    loss, diag = clipped_policy_loss(logp, old, adv, epsilon_low=0.2, epsilon_high=0.28)
    # r=2, A>0 -> clipped to 1.28; r=0.5, A<0 -> clipped at 0.8 (-min(-0.5, -0.8) = 0.8); r=2, A<0 -> unclipped
    assert torch.allclose(loss, torch.tensor([-1.0, -1.28, 0.8, 2.0]), atol=1e-6)
    assert diag["clipped"].tolist() == [0.0, 1.0, 1.0, 0.0]
    loss.sum().backward()
    assert logp.grad is not None and logp.grad[1] == 0 and logp.grad[2] == 0 and logp.grad[0] == -1.0


def test_kl_and_is_weights_enter_the_loss() -> None:
    logp = torch.tensor([-1.0, -2.0])
    ref = torch.tensor([-1.5, -2.0])
    assert torch.all(kl_k3(logp, ref) >= 0) and kl_k3(logp, ref)[1] == 0
    base, _ = clipped_policy_loss(logp, logp, torch.tensor([1.0, 1.0]))
    w, _ = clipped_policy_loss(logp, logp, torch.tensor([1.0, 1.0]), is_weights=torch.tensor([0.5, 2.0]))
    assert torch.allclose(w, base * torch.tensor([0.5, 2.0]))
    k, diag = clipped_policy_loss(logp, logp, torch.tensor([1.0, 1.0]), beta=0.1, ref_logp=ref)
    assert torch.allclose(k - base, 0.1 * diag["kl"]) and diag["kl"][0] > 0
    with pytest.raises(ConfigError, match="ref_logp"):
        clipped_policy_loss(logp, logp, torch.ones(2), beta=0.1)


def test_k3_kl_gradient_is_trls_bias_corrected_one() -> None:
    """TRL 1.16 (use_bias_correction_kl=True): per_token_kl = k3 * coef_1 with coef_1 = exp(logp - old)
    carrying gradient, so on-policy (r == 1) d/dlogp [beta * k3 * r] = beta * (k3 + 1 - exp(ref - logp))."""
    beta = 0.1
    ref = torch.tensor([-1.5, -2.0, -0.2])
    adv = torch.zeros(3)  # only the KL term moves the gradient
    logp = torch.tensor([-1.0, -2.0, -3.0], requires_grad=True)
    loss, diag = clipped_policy_loss(logp, logp.detach(), adv, beta=beta, ref_logp=ref)
    loss.sum().backward()
    lp = logp.detach()
    k3 = kl_k3(lp, ref)
    assert torch.allclose(logp.grad, beta * (k3 + 1 - torch.exp(ref - lp)), atol=1e-6)
    assert torch.allclose(diag["kl"], k3)  # value unchanged on-policy
    plain = logp.detach().clone().requires_grad_(True)
    loss, _ = clipped_policy_loss(plain, plain.detach(), adv, beta=beta, ref_logp=ref, bias_correction_kl=False)
    loss.sum().backward()
    assert torch.allclose(plain.grad, beta * (1 - torch.exp(ref - lp)), atol=1e-6)  # plain k3 (use_bias_correction_kl=False)


def test_pair_weights_reproduce_trl_normalisations() -> None:
    # rollout 0 has 3 tokens, rollout 1 has 1 token; per-token losses l
    rollout = torch.tensor([0, 0, 0, 1])
    counts = torch.tensor([3, 1])
    l = torch.tensor([1.0, 2.0, 3.0, 10.0])

    def batch_loss(loss_type: str, pairs: slice = slice(None)) -> torch.Tensor:
        return (l[pairs] * pair_weights(loss_type, rollout[pairs], tokens_per_rollout=counts, max_completion_length=8)).sum()

    assert torch.isclose(batch_loss("grpo"), torch.tensor((2.0 + 10.0) / 2))  # mean of per-rollout means
    assert torch.isclose(batch_loss("dapo"), torch.tensor(16.0 / 4))
    assert torch.isclose(batch_loss("bnpo"), torch.tensor(16.0 / 4))  # one micro-batch: bnpo is dapo
    assert torch.isclose(batch_loss("dr_grpo"), torch.tensor(16.0 / (2 * 8)))
    # split into two packs: the weighted sums add up to the same batch loss
    assert torch.isclose(batch_loss("grpo", slice(0, 2)) + batch_loss("grpo", slice(2, 4)), batch_loss("grpo"))
    with pytest.raises(ConfigError, match="loss_type"):
        batch_loss("cispo")


def test_pair_weights_normalise_each_micro_batch_as_trl() -> None:
    """gradient_accumulation_steps = 2: rollouts 0, 1 in micro-batch 0, rollouts 2, 3 in micro-batch 1. TRL
    normalises grpo/bnpo/dr_grpo within each micro-batch and divides by 2; dapo by the step's tokens."""
    counts = torch.tensor([3, 1, 2, 0])  # rollout 3 sampled nothing: it does not count as a sequence
    rollout = torch.tensor([0, 0, 0, 1, 2, 2])
    per_pair = torch.tensor([1.0, 2.0, 3.0, 10.0, 4.0, 8.0])
    micro = torch.tensor([0, 0, 1, 1])

    def loss(loss_type: str) -> float:
        w = pair_weights(loss_type, rollout, tokens_per_rollout=counts, max_completion_length=8, micro_batch=micro, num_micro_batches=2)
        return float((per_pair * w).sum())

    assert loss("grpo") == pytest.approx(((2.0 + 10.0) / 2 + 6.0 / 1) / 2)
    assert loss("bnpo") == pytest.approx((16.0 / 4 + 12.0 / 2) / 2)
    assert loss("dr_grpo") == pytest.approx((16.0 / (2 * 8) + 12.0 / (1 * 8)) / 2)
    assert loss("dapo") == pytest.approx(28.0 / 6)
    with pytest.raises(ConfigError, match="no rollout to train on"):
        pair_weights("grpo", rollout[:0], tokens_per_rollout=torch.zeros(2, dtype=torch.long), max_completion_length=8)


def test_mismatch_ignores_unsampled_tokens() -> None:
    a = torch.tensor([-1.0, -2.0, -3.0])
    b = torch.tensor([-1.5, -2.0, 0.0])
    assert mismatch(a, b, torch.tensor([True, True, False])) == pytest.approx(0.25)
    assert mismatch(a, b, torch.tensor([False, False, False])) == 0.0


def test_ppo_advantage_and_value_loss() -> None:
    values = torch.tensor([0.2, 0.8], requires_grad=True)
    returns = torch.tensor([1.0, 0.0])
    adv = ppo_advantages(returns, values)
    assert torch.allclose(adv, torch.tensor([0.8, -0.8])) and not adv.requires_grad
    vl = value_loss(values, returns)
    assert torch.isclose(vl, torch.tensor(0.5 * (0.64 + 0.64) / 2))
    vl.backward()
    assert values.grad is not None and values.grad[0] < 0 < values.grad[1]  # pulls V toward R
    clipped = value_loss(values.detach() + 1.0, returns, old_values=values.detach(), clip=0.1)
    assert clipped > value_loss(values.detach() + 0.1, returns)
