"""FSDP2 for the policy (``--fsdp``): torch's ``fully_shard`` applied by the trainer, on CPU (gloo) and GPU alike.

Why not accelerate's FSDP plugin: accelerate (1.16) enables FSDP only for GPU-like devices; on a
CPU-only machine ``--use_fsdp`` leaves the processes as plain MULTI_CPU and its ``prepare`` wraps the
model in DDP. So the trainer shards the policy itself: every decoder layer (the model's
``_no_split_modules``) and then the root are ``fully_shard``-ed over all processes, with bf16
compute and fp32 gradient reduction when ``--bf16`` (``MixedPrecisionPolicy``; the sharded
parameters, the master weights, stay fp32). The accelerator still owns the process group, the
device, accumulation, the scheduler's and RNG state; the model and optimizer are not ``prepare``-d.
The same code runs under ``accelerate launch --multi_gpu`` on GPUs, where only the collectives'
backend (NCCL) differs.

What sharding changes for the trainer: every rank must forward the same number of packs (each
forward all-gathers the layers' parameters: ``rank_share(..., equal_counts=True)``); the full
weights exist only when gathered, collectively (``gather_policy``); checkpoints are
``torch.distributed.checkpoint`` folders, each rank writing its own shards (``save_sharded``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import torch

from clawgym_env.errors import ConfigError
from trainers.core.weight_sync import PolicyWeights

__all__ = ["gather_policy", "is_sharded", "load_sharded", "save_sharded", "shard_policy"]

_PEFT_PREFIX = "base_model.model."


def shard_policy(model: torch.nn.Module, *, bf16: bool) -> torch.nn.Module:
    """``fully_shard`` every decoder layer, then the root (whose parameters stay gathered between forward and backward)."""
    import torch.distributed as dist
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        raise ConfigError(
            "--fsdp shards the policy over the launched processes; launch 2 or more with "
            "`accelerate launch --multi_gpu --num_processes N` (or torchrun), or drop --fsdp"
        )
    layer_names = set(getattr(_base(model), "_no_split_modules", None) or [])
    layers = [m for m in model.modules() if type(m).__name__ in layer_names]
    if not layers:
        raise ConfigError(
            f"--fsdp: {type(_base(model)).__name__} names no decoder layer class (_no_split_modules); "
            "this model cannot be sharded layer by layer"
        )
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if bf16 else MixedPrecisionPolicy()
    for layer in layers:
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    return model


def is_sharded(model: Any) -> bool:
    """Whether ``model`` is an FSDP2 module (``shard_policy``)."""
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def _base(model: Any) -> Any:
    from peft import PeftModel

    return model.get_base_model() if isinstance(model, PeftModel) else model


def _merge_lora(model: Any, full: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Base names, every LoRA adapter folded in (``W + scaling * B @ A``), from a gathered PEFT state dict."""
    from peft.tuners.lora import LoraLayer

    from trainers.core.lora import ADAPTER

    deltas: dict[str, torch.Tensor] = {}
    for name, module in model.named_modules():
        if isinstance(module, LoraLayer) and ADAPTER in module.lora_A:
            a, b = full[f"{name}.lora_A.{ADAPTER}.weight"], full[f"{name}.lora_B.{ADAPTER}.weight"]
            delta = (b.float() @ a.float()) * module.scaling[ADAPTER]
            deltas[f"{name}.weight"] = delta.T if getattr(module, "fan_in_fan_out", False) else delta
    out: dict[str, torch.Tensor] = {}
    for key, value in full.items():
        if ".lora_" in key:
            continue
        plain = key.replace(".base_layer.", ".")
        merged = value + deltas[plain].to(value.dtype) if plain in deltas else value
        out[plain.removeprefix(_PEFT_PREFIX)] = merged
    return out


def gather_policy(model: Any, tokenizer: Any, *, merge_lora: bool) -> PolicyWeights:
    """The full policy, gathered to the CPU of rank 0 (collective: every rank calls it; others get an empty dict)."""
    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    full = cast(dict[str, torch.Tensor], get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True)))
    if dist.get_rank() == 0 and merge_lora:
        full = _merge_lora(model, full)

    def save(folder: Path) -> None:
        _base(model).save_pretrained(folder, state_dict=full)
        tokenizer.save_pretrained(folder)

    return PolicyWeights(state_dict=lambda: full, save_pretrained=save)


def _state(model: Any, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_state, optim_state = get_state_dict(model, optimizer)
    return {"model": model_state, "optimizer": optim_state}


def save_sharded(model: Any, optimizer: torch.optim.Optimizer, folder: Path) -> None:
    """Model and optimizer shards, each rank its own (``torch.distributed.checkpoint``; collective)."""
    import torch.distributed.checkpoint as dcp

    dcp.save(_state(model, optimizer), checkpoint_id=str(folder))


def load_sharded(model: Any, optimizer: torch.optim.Optimizer, folder: Path) -> None:
    """Restore what ``save_sharded`` wrote into the sharded model and its optimizer (collective)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_state_dict

    if not (folder / ".metadata").is_file():
        raise ConfigError(
            f"{folder}: no sharded model/optimizer state (.metadata); this checkpoint was not saved with --fsdp, resume it without --fsdp"
        )
    state = _state(model, optimizer)
    dcp.load(state, checkpoint_id=str(folder))
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])
