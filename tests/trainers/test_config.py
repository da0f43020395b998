"""TreeGRPOConfig / TreePPOConfig invariants: each refusal names the field and what to set."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from clawgym_env.errors import ConfigError
from tests.trainers.conftest import make_config
from trainers.tree_ppo.config import TreePPOConfig


def test_tree_fields_parse_and_trl_fields_keep_their_meaning(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, harness="custom, claude-code", mix_weights="1,3", epsilon=0.1, beta=0.02)
    assert cfg.harness_names == ["custom", "claude-code"] and cfg.harness_weights == [1.0, 3.0]
    assert (cfg.epsilon, cfg.beta, cfg.loss_type, cfg.bf16) == (0.1, 0.02, "grpo", False)
    assert make_config(tmp_path).harness_weights == [1.0]


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"mix_weights": "1,1"}, "set one weight per harness"),
        ({"mix_weights": "a"}, "comma-separated numbers"),
        ({"mix_weights": "-1"}, "non-negative"),
        ({"harness": ""}, "set --harness"),
        ({"num_generations": 1}, "num_generations >= 2"),
        ({"loss_type": "cispo"}, "set loss_type to one of"),
        ({"vllm_importance_sampling_mode": "token"}, "vllm_importance_sampling_mode='token': set one of"),
        ({"temperature": 0.0}, "positive sampling temperature"),
        ({"gradient_accumulation_steps": 3}, "set a divisor of pairs_per_step"),
        ({"off_policy_mask_threshold": 0.5}, "token_mask"),
        ({"max_leaves": 0}, "max_leaves"),
        ({"max_staleness": -1}, "max_staleness"),
        ({"executor": "slurm"}, "executor"),
        ({"executor": "ray", "rollout_backend": "vllm:http://h:1#m"}, "executor='ray' with a vLLM"),
        ({"use_vllm": True}, "use_vllm=False"),
        ({"rollout_process": True, "executor": "ray"}, "rollout_process runs the local executor's hf: policy"),
        ({"rollout_process": True, "rollout_backend": "vllm:http://h:1#m"}, "already out of process"),
        ({"rollout_backend": "openai:gpt-4o"}, "'hf:PATH' or 'vllm:URL'"),
        ({"suite": ""}, "set --suite"),
        ({"max_steps": -1}, "set --max_steps"),
        ({"eval_every_steps": 2}, "set --eval_suite"),
        ({"eval_episodes": 0}, "eval_episodes >= 1"),
        ({"importance_sampling_level": "sequence"}, "importance_sampling_level='token'"),
        ({"crashed_episodes": "drop"}, "crashed_episodes='drop': set one of"),
        ({"logprob_chunk_size": -1}, "logprob_chunk_size=-1"),
    ],
)
def test_invalid_settings_say_what_to_set(tmp_path: Path, kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_config(tmp_path, **kw)


def test_ppo_config_checks_its_value_fields(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, TreePPOConfig, value_warmup_steps=3)
    assert cfg.value_warmup_steps == 3 and cfg.drop_zero_variance_from_loss is False
    with pytest.raises(ConfigError, match="value_warmup_steps"):
        make_config(tmp_path, TreePPOConfig, value_warmup_steps=-1)
    with pytest.raises(ConfigError, match="cliprange_value"):
        make_config(tmp_path, TreePPOConfig, cliprange_value=0.0)


@pytest.mark.parametrize(
    ("field", "value", "hint"),
    [
        ("per_device_train_batch_size", 16, "--pairs_per_step"),
        ("num_train_epochs", 2.0, "--max_steps"),
        ("top_k", 5, "--temperature"),
        ("vllm_server_port", 9000, "--rollout_backend vllm:"),
        ("push_to_hub", True, "checkpoint-<step>"),
        ("fsdp_config", {"reshard_after_forward": False}, "accelerate launch"),
    ],
)
def test_trl_fields_the_tree_trainers_ignore_are_refused_with_what_to_set(tmp_path: Path, field: str, value: Any, hint: str) -> None:
    with pytest.raises(ConfigError, match=rf"{field}=.*no effect on tree training: .*{re.escape(hint)}"):
        make_config(tmp_path, **{field: value})


def test_every_grpo_config_field_is_sorted() -> None:
    """Each GRPOConfig field is used, harmless, or refused with a hint (a new TRL field shows up here)."""
    import dataclasses

    from trl import GRPOConfig

    from trainers.tree_grpo.fields import INSTEAD, NO_EFFECT, USED

    names = {f.name for f in dataclasses.fields(GRPOConfig)}
    assert names - USED - NO_EFFECT - set(INSTEAD) == set()
    assert not (USED & NO_EFFECT) and not (USED & set(INSTEAD)) and not (NO_EFFECT & set(INSTEAD))


@pytest.mark.parametrize("groups", [3, 6, 7])
def test_any_group_size_passes_trls_generation_batch_check(tmp_path: Path, groups: int) -> None:
    """GRPOConfig wants its (unread) generation batch, 8 by default, to be a multiple of num_generations."""
    assert make_config(tmp_path, num_generations=groups, pairs_per_step=4).num_generations == groups
