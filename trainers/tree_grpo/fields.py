"""Which ``GRPOConfig`` / ``TrainingArguments`` fields the tree trainers read, and what to set instead of the rest.

Every field of TRL's config is in exactly one of three groups: ``USED`` (it works as documented
by TRL), ``NO_EFFECT`` (it only names, labels or quiets the run, so any value is fine), or
``INSTEAD`` (it would change training but has no meaning here): a value other than the default
is refused with the setting that does the job. A field TRL adds in a new release lands in none
of the groups, and ``refuse_unused`` refuses a non-default value of it too, until it is sorted.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from clawgym_env.errors import ConfigError

__all__ = ["INSTEAD", "NO_EFFECT", "REMOVED", "USED", "explain_unknown", "refuse_unused"]

USED = frozenset(
    {
        "output_dir",
        "max_steps",
        "learning_rate",
        "lr_scheduler_type",
        "lr_scheduler_kwargs",
        "warmup_steps",
        "weight_decay",
        "adam_beta1",
        "adam_beta2",
        "adam_epsilon",
        "gradient_accumulation_steps",
        "max_grad_norm",
        "bf16",
        "fp16",
        "activation_checkpointing",
        "activation_checkpointing_kwargs",
        "gradient_checkpointing",
        "gradient_checkpointing_kwargs",
        "logging_steps",
        "report_to",
        "save_steps",
        "seed",
        "use_cpu",
        "fsdp",
        "ddp_find_unused_parameters",
        "ddp_bucket_cap_mb",
        "ddp_broadcast_buffers",
        "ddp_static_graph",
        "ddp_backend",
        "ddp_timeout",
        "resume_from_checkpoint",
        "model_init_kwargs",
        "num_generations",
        "max_completion_length",
        "temperature",
        "top_p",
        "beta",
        "num_iterations",
        "epsilon",
        "delta",
        "epsilon_high",
        "importance_sampling_level",
        "scale_rewards",
        "loss_type",
        "use_vllm",
        "disable_dropout",
        "use_bias_correction_kl",
        "router_aux_loss_coef",
        "vllm_importance_sampling_correction",
        "vllm_importance_sampling_mode",
        "vllm_importance_sampling_clip_max",
        "vllm_importance_sampling_clip_min",
        "vllm_importance_sampling_cap",
    }
)
NO_EFFECT = frozenset(
    {
        "logging_strategy",
        "logging_first_step",
        "log_on_each_node",
        "logging_nan_inf_filter",
        "log_level",
        "log_level_replica",
        "disable_tqdm",
        "run_name",
        "project",
        "trackio_space_id",
        "trackio_bucket_id",
        "trackio_static_space_id",
        "skip_memory_metrics",
        "debug",
        "do_train",
        "do_eval",
        "do_predict",
        "local_rank",
        "save_strategy",
        "use_cache",
        "hub_token",
    }
)
_BATCH = "a step is --pairs_per_step groups of --num_generations episodes; set those"
_NO_DATA = "there is no dataset or dataloader (episodes come from the suite); drop it"
_EVAL = "set --eval_suite, --eval_every_steps and --eval_episodes"
_SAMPLING = "only --temperature, --top_p and --max_completion_length reach the harnesses' model calls; drop it"
_VLLM = "set --rollout_backend vllm:http://HOST:PORT#MODEL (and --weight_sync)"
_ACCEL = "configure processes with `accelerate launch` flags or --config_file (accelerate config)"
_SAVE = "checkpoints are <output_dir>/checkpoint-<step> every --save_steps; manage them yourself"
_NOT = "not supported by the tree trainers; leave it at its default"
INSTEAD: dict[str, str] = {
    **dict.fromkeys(["per_device_train_batch_size", "generation_batch_size", "steps_per_generation", "auto_find_batch_size"], _BATCH),
    "num_train_epochs": "tree trainers count steps, not epochs; set --max_steps",
    **dict.fromkeys(
        ["optim", "optim_args", "optim_target_modules"], "the optimizer is AdamW; set --adam_beta1/2, --adam_epsilon, --weight_decay"
    ),
    **dict.fromkeys(["fsdp_config", "deepspeed", "accelerator_config", "parallelism_config"], _ACCEL),
    **dict.fromkeys(
        [
            "top_k",
            "min_p",
            "repetition_penalty",
            "generation_kwargs",
            "chat_template_kwargs",
            "cache_implementation",
            "use_transformers_paged",
            "use_transformers_continuous_batching",
            "transformers_continuous_batching_config",
            "ds3_gather_for_generation",
            "max_tool_calling_iterations",
        ],
        _SAMPLING,
    ),
    **{
        k: _VLLM
        for k in (
            "vllm_mode",
            "vllm_model_impl",
            "vllm_enable_sleep_mode",
            "vllm_structured_outputs_regex",
            "vllm_server_base_url",
            "vllm_server_host",
            "vllm_server_port",
            "vllm_server_timeout",
            "vllm_group_port",
            "vllm_gpu_memory_utilization",
            "vllm_max_model_length",
            "vllm_tensor_parallel_size",
        )
    },
    "off_policy_mask_threshold": "off-policy sequence masking is not supported by the tree trainers (a sequence is a whole "
    "episode, possibly over several packs); bound the importance ratio with "
    "--vllm_importance_sampling_mode token_mask and --vllm_importance_sampling_clip_min/max",
    **dict.fromkeys(["reward_weights", "multi_objective_aggregation"], "rewards come from each task's verifiers; weight them in task.yaml"),
    **dict.fromkeys(
        ["sync_ref_model", "ref_model_mixup_alpha", "ref_model_sync_steps"], "the reference model is the initial policy; " + _NOT
    ),
    **dict.fromkeys(
        [
            "top_entropy_quantile",
            "entropy_coef",
            "use_adaptive_entropy",
            "entropy_coef_min",
            "entropy_coef_max",
            "entropy_coef_delta",
            "entropy_target",
            "sapo_temperature_neg",
            "sapo_temperature_pos",
            "vespo_k_pos",
            "vespo_lambda_pos",
            "vespo_k_neg",
            "vespo_lambda_neg",
            "mask_truncated_completions",
            "cast_lm_head_to_fp32",
            "neftune_noise_alpha",
            "label_smoothing_factor",
            "tf32",
            "torch_compile",
            "torch_compile_backend",
            "torch_compile_mode",
            "use_liger_kernel",
            "liger_kernel_config",
            "trust_remote_code",
            "torch_empty_cache_steps",
            "full_determinism",
            "data_seed",
            "average_tokens_across_devices",
            "pad_to_multiple_of",
            "include_num_input_tokens_seen",
            "bf16_full_eval",
            "fp16_full_eval",
        ],
        _NOT,
    ),
    **dict.fromkeys(
        [
            "eval_strategy",
            "eval_steps",
            "eval_delay",
            "per_device_eval_batch_size",
            "eval_on_start",
            "num_generations_eval",
            "prediction_loss_only",
            "eval_do_concat_batches",
            "eval_use_gather_object",
            "eval_accumulation_steps",
            "include_for_metrics",
            "batch_eval_metrics",
            "load_best_model_at_end",
            "metric_for_best_model",
            "greater_is_better",
        ],
        _EVAL,
    ),
    **dict.fromkeys(
        [
            "save_total_limit",
            "save_only_model",
            "save_on_each_node",
            "enable_jit_checkpoint",
            "push_to_hub",
            "hub_model_id",
            "hub_strategy",
            "hub_private_repo",
            "hub_always_push",
            "hub_revision",
            "restore_callback_states_from_checkpoint",
            "ignore_data_skip",
        ],
        _SAVE,
    ),
    **dict.fromkeys(
        [
            "dataloader_drop_last",
            "dataloader_num_workers",
            "dataloader_pin_memory",
            "dataloader_persistent_workers",
            "dataloader_prefetch_factor",
            "dataloader_multiprocessing_context",
            "dataloader_in_order",
            "remove_unused_columns",
            "label_names",
            "train_sampling_strategy",
            "length_column_name",
            "shuffle_dataset",
        ],
        _NO_DATA,
    ),
    **dict.fromkeys(
        ["log_completions", "log_multimodal", "num_completions_to_print", "log_unique_prompts", "log_completions_hub_repo"],
        "every model call is in the capture (`clawgym trace show`); drop it",
    ),
}

REMOVED: dict[str, str] = {
    "is_cap": "the cap of the importance weight is TRL's --vllm_importance_sampling_clip_max (default 2.0; the default "
    "--vllm_importance_sampling_mode token_truncate caps the same per-token weight)",
    "skip_zero_variance": "groups whose rewards are all equal stay in the step with advantage 0, as in TRL; "
    "--drop_zero_variance_from_loss true leaves them out (it changes the loss)",
}
"""Fields the tree configs no longer have, and what sets the same thing now (an old recipe names them)."""


def explain_unknown(message: str) -> str:
    """A parser's complaint about unknown flags or config keys, with what replaces each removed field it names."""
    named = {flag.replace("-", "_") for flag in re.findall(r"--([\w-]+)", message)}
    return "; ".join([message, *(f"{name} was removed: {fix}" for name, fix in REMOVED.items() if name in named)])


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _off(value: Any) -> bool:
    return value is None or value is False or (isinstance(value, str | list | dict) and value in ("", "no", [], {}))


def refuse_unused(config: Any, trl_fields: frozenset[str]) -> None:
    """Raise on the first TRL field set away from its default that the tree trainers would not honour.

    ``trl_fields`` are GRPOConfig's own fields; the subclass's fields are checked by the subclass.
    Call before ``TrainingArguments.__post_init__`` rewrites values.
    """
    for f in dataclasses.fields(config):
        if f.name not in trl_fields or f.name in USED or f.name in NO_EFFECT:
            continue
        default, value = _default(f), getattr(config, f.name)
        if value == default or (_off(value) and _off(default)):  # the parser turns 'no' into False, '' into None
            continue
        hint = INSTEAD.get(f.name, "the tree trainers do not read it yet; leave it at its default")
        raise ConfigError(f"{type(config).__name__}.{f.name}={value!r} has no effect on tree training: {hint}")
