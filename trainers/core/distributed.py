"""The trainers on accelerate: processes, mixed precision, packs per rank, reductions, checkpoints, trackers.

Run a trainer under ``accelerate launch`` (DDP; on CPU ``--multi_gpu`` picks torchrun + gloo)
and every process builds the same model; only the main process samples (the rollout side), the
batch is broadcast, and each rank forwards its share of the packs (balanced by token count).
Gradients meet in DDP's all-reduce, so each rank scales its share of the batch loss by the
number of processes (DDP averages). Mixed precision is accelerate's autocast over fp32 master
weights. Checkpoints are ``Accelerator.save_state`` (model, optimizer, scheduler, every rank's RNG)
plus the trainer's own step/version/history and the sampler's RNG. With ``--fsdp`` the same
launch shards the policy instead of replicating it (``trainers.core.fsdp``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from clawgym_env.errors import ConfigError

if TYPE_CHECKING:
    from accelerate import Accelerator

    from trainers.tree_grpo.config import TreeGRPOConfig

__all__ = ["balance_by_tokens", "broadcast", "leave_process_group", "make_accelerator", "mixed_precision", "reduce_totals", "trackers"]


_NO_FSDP = (
    "the tree trainers shard the policy themselves (torch's fully_shard, on CPU and GPU alike): drop accelerate's "
    "--use_fsdp and set --fsdp, launched with `accelerate launch --multi_gpu --num_processes N` (or torchrun)"
)


def mixed_precision(config: TreeGRPOConfig) -> str:
    """accelerate's ``mixed_precision`` for the config's ``bf16`` / ``fp16`` (weights stay fp32)."""
    return "bf16" if config.bf16 else "fp16" if config.fp16 else "no"


def trackers(config: TreeGRPOConfig) -> list[str]:
    """The trackers ``report_to`` asks for (``tensorboard``, ``wandb``)."""
    report = config.report_to or []
    report = [report] if isinstance(report, str) else list(report)
    return [r for r in report if r in ("tensorboard", "wandb")]


def make_accelerator(config: TreeGRPOConfig) -> Accelerator:
    """One Accelerator per trainer: device, processes, mixed precision, trackers."""
    from accelerate import Accelerator
    from accelerate.utils import DistributedDataParallelKwargs, InitProcessGroupKwargs, ProjectConfiguration

    if os.environ.get("ACCELERATE_USE_FSDP", "false").lower() in ("1", "true"):
        raise ConfigError(_NO_FSDP)
    out = Path(config.output_dir)  # type: ignore[arg-type]  # TrainingArguments always sets output_dir
    ddp = DistributedDataParallelKwargs(
        find_unused_parameters=bool(config.ddp_find_unused_parameters),
        broadcast_buffers=config.ddp_broadcast_buffers is not False,
        static_graph=bool(config.ddp_static_graph),
        **({"bucket_cap_mb": int(config.ddp_bucket_cap_mb)} if config.ddp_bucket_cap_mb else {}),
    )
    group = InitProcessGroupKwargs(backend=config.ddp_backend, timeout=timedelta(seconds=int(config.ddp_timeout or 1800)))
    accelerator = Accelerator(
        cpu=bool(config.use_cpu),
        mixed_precision=mixed_precision(config),
        gradient_accumulation_steps=1,  # a step's micro-batches are the policy update's (trainers.core.policy_step)
        log_with=trackers(config) or None,
        project_config=ProjectConfiguration(project_dir=str(out), logging_dir=str(out / "runs")),
        kwargs_handlers=[ddp, group],
        step_scheduler_with_optimizer=False,
    )
    launched = int(os.environ.get("WORLD_SIZE", "1"))
    if launched > 1 and accelerator.num_processes == 1:  # measured: `--use_fsdp` on a CPU-only box (accelerate 1.15)
        raise ConfigError(f"launched {launched} processes but accelerate joined them into none (each would train alone); " + _NO_FSDP)
    return accelerator


def balance_by_tokens(sizes: Sequence[int], ranks: int) -> list[list[int]]:
    """Indices of ``sizes`` per rank, largest first onto the least-loaded rank (same answer on every rank)."""
    loads = [0] * ranks
    out: list[list[int]] = [[] for _ in range(ranks)]
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        r = min(range(ranks), key=lambda r: (loads[r], r))
        out[r].append(i)
        loads[r] += sizes[i]
    return [sorted(x) for x in out]


def broadcast(accelerator: Accelerator, obj: Any) -> Any:
    """The main process's ``obj`` on every process (pickled; a rollout batch is small next to a model)."""
    if accelerator.num_processes == 1:
        return obj
    from accelerate.utils import broadcast_object_list

    return broadcast_object_list([obj])[0]


def reduce_totals(accelerator: Accelerator, totals: dict[str, float]) -> dict[str, float]:
    """Sum each key over processes (keys may differ between ranks: a harness only one rank saw)."""
    if accelerator.num_processes == 1:
        return dict(totals)
    from accelerate.utils import gather_object

    out: dict[str, float] = {}
    for part in gather_object([totals]):
        for k, v in part.items():
            out[k] = out.get(k, 0.0) + float(v)
    return out


def leave_process_group(wait_s: float = 60.0) -> None:
    """Meet the other ranks (at most ``wait_s``), then destroy the default process group.

    Left to interpreter exit, the gloo process group is torn down by C++ destructors while its
    threads still run, and a rank dies with "terminate called without an active exception"
    (seen once in test_distributed's resume test). A rank closing on an error does not wait
    longer than ``wait_s`` for ranks that will never arrive.
    """
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return
    with contextlib.suppress(RuntimeError):  # DistBackendError (a rank is gone) is a RuntimeError
        if dist.get_backend() == "gloo":
            dist.monitored_barrier(timeout=timedelta(seconds=wait_s), wait_all_ranks=True)
        else:
            dist.barrier()
    dist.destroy_process_group()


def seed_everything(seed: int) -> None:
    """Same seed on every rank: the same initial weights and the same value-model updates everywhere."""
    from accelerate.utils import set_seed

    set_seed(seed)


def fp32(model: torch.nn.Module) -> bool:
    return all(p.dtype == torch.float32 for p in model.parameters())
