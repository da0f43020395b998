"""The weight group: trainer (rank 0) and rollout processes (ranks 1..n) broadcasting a state dict.

Imports torch only, so the same functions run in the trainer, in the ``--rollout_process`` child and
inside vLLM's workers (this folder is on their PYTHONPATH; ``clawgym_vllm_worker.WeightSync``). The
group is apart from any default process group: a ``TCPStore`` hosted by rank 0, and a gloo or NCCL
process group over it, chosen by the device the tensors live on. A sync announces the tensors
(``tensor_meta``) on a side channel, then broadcasts them in that order.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import torch
import torch.distributed as dist

TensorMeta = tuple[str, str, list[int]]
"""(name, dtype without ``torch.``, shape): what a receiver allocates before each broadcast."""


def group_backend(device: torch.device) -> str:
    """The collective backend for tensors on ``device``: NCCL on CUDA, gloo elsewhere."""
    return "nccl" if device.type == "cuda" else "gloo"


def open_group(host: str, port: int, rank: int, world_size: int, backend: str, timeout_s: float = 600) -> dist.ProcessGroup:
    """Join the weight group (rank 0 hosts its store); returns once every rank has joined."""
    timeout = timedelta(seconds=timeout_s)
    store = dist.TCPStore(host, port, world_size, is_master=rank == 0, timeout=timeout)
    if backend == "nccl":
        return dist.ProcessGroupNCCL(store, rank, world_size)  # type: ignore[call-arg, return-value]  # torch stub: options optional
    return dist.ProcessGroupGloo(store, rank, world_size, timeout)  # type: ignore[return-value]  # a ProcessGroup backend


def tensor_meta(state: dict[str, torch.Tensor]) -> list[TensorMeta]:
    """The announcement that precedes a broadcast: every tensor's name, dtype and shape, in broadcast order."""
    return [(k, str(v.dtype).removeprefix("torch."), list(v.shape)) for k, v in state.items()]


def broadcast_state(group: dist.ProcessGroup, state: dict[str, torch.Tensor], device: torch.device) -> None:
    """Rank 0: send every tensor of ``state`` in order (moved to ``device``, as the group's backend needs)."""
    for tensor in state.values():
        group.broadcast(tensor.detach().to(device).contiguous(), root=0).wait()


def receive_state(group: dist.ProcessGroup, meta: list[TensorMeta], device: torch.device) -> Iterator[tuple[str, torch.Tensor]]:
    """Ranks 1..n: each announced tensor as it arrives."""
    for name, dtype, shape in meta:
        tensor = torch.empty(shape, dtype=getattr(torch, dtype), device=device)
        group.broadcast(tensor, root=0).wait()
        yield name, tensor
