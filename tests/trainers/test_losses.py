"""Loss pieces on toy tensors: group advantages, truncated IS, clipping, TRL normalisations, PPO."""

from __future__ import annotations

import pytest
import torch

from clawgym_env.errors import ConfigError
from trainers.core.losses import (
    clipped_policy_loss,
    group_advantages,
    kl_k3,
    mismatch,
    pair_weights,
    ppo_advantages,
    truncated_is_weights,
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


def test_truncated_is_weights_cap_and_nan() -> None:
    old = torch.tensor([-1.0, -1.0, -1.0, -1.0])
    roll = torch.tensor([-1.0, -3.0, -0.5, float("nan")])
    w = truncated_is_weights(old, roll, cap=2.0)
    assert torch.allclose(w, torch.tensor([1.0, 2.0, float(torch.exp(torch.tensor(-0.5))), 1.0]))
    with pytest.raises(ConfigError, match="positive cap"):
        truncated_is_weights(old, roll, cap=0)


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
    grpo = (l * pair_weights("grpo", rollout, tokens_per_rollout=counts, num_rollouts=2, max_completion_length=8)).sum()
    assert torch.isclose(grpo, torch.tensor((2.0 + 10.0) / 2))  # mean of per-rollout means
    dapo = (l * pair_weights("dapo", rollout, tokens_per_rollout=counts, num_rollouts=2, max_completion_length=8)).sum()
    assert torch.isclose(dapo, torch.tensor(16.0 / 4))
    dr = (l * pair_weights("dr_grpo", rollout, tokens_per_rollout=counts, num_rollouts=2, max_completion_length=8)).sum()
    assert torch.isclose(dr, torch.tensor(16.0 / (2 * 8)))
    # split into two packs: the weighted sums add up to the same batch loss
    a = pair_weights("grpo", rollout[:2], tokens_per_rollout=counts, num_rollouts=2, max_completion_length=8)
    b = pair_weights("grpo", rollout[2:], tokens_per_rollout=counts, num_rollouts=2, max_completion_length=8)
    assert torch.isclose((l[:2] * a).sum() + (l[2:] * b).sum(), grpo)
    with pytest.raises(ConfigError, match="loss_type"):
        pair_weights("cispo", rollout, tokens_per_rollout=counts, num_rollouts=2, max_completion_length=8)


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
