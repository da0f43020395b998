"""Weight sync by broadcast (``--weight_sync broadcast``): tensors sent over a process group, no folder written.

The trainer (rank 0) and the rollout side's processes (ranks 1..n) form a process group of their
own, apart from the trainer's default one, through a ``TCPStore`` the trainer hosts
(``clawgym_weight_group``, which the receivers import too). Its backend follows the trainer's
device: NCCL on CUDA, gloo on CPU; everything else (the rendezvous, the tensor list announced
first, the broadcasts in that order, the receiver's load, the version it then reports) is one code
path. Receivers: the ``--rollout_process`` child (``ChildHFBackend``) and a vLLM server's GPU
workers (``trainers.core.nccl_sync``).
"""

from __future__ import annotations

import socket
from concurrent.futures import Future
from typing import TYPE_CHECKING, Protocol

import torch

from clawgym_env.proxy.backends.vllm_worker.clawgym_weight_group import (
    TensorMeta,
    broadcast_state,
    group_backend,
    open_group,
    tensor_meta,
)

if TYPE_CHECKING:
    from trainers.core.weight_sync import PolicyWeights

__all__ = ["BroadcastTarget", "CollectiveBroadcast", "free_port"]


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class BroadcastTarget(Protocol):
    """A rollout side that joins the weight group and loads what is broadcast to it.

    Both calls return at once; the future completes when the receivers have joined (or loaded
    the announced tensors and report ``version``).
    """

    @property
    def receivers(self) -> int: ...

    def join_weight_group(self, host: str, port: int, world_size: int, backend: str) -> Future[None]: ...

    def receive_weights(self, meta: list[TensorMeta], version: int) -> Future[None]: ...


class CollectiveBroadcast:
    """``WeightSync`` by broadcast from the trainer (rank 0) to a ``BroadcastTarget``."""

    def __init__(
        self, target: BroadcastTarget, device: torch.device, *, host: str = "127.0.0.1", port: int | None = None, timeout_s: float = 600
    ) -> None:
        self.target, self.device, self.timeout_s = target, device, timeout_s
        port = port or free_port(host)
        world = 1 + target.receivers
        backend = group_backend(device)
        joined = target.join_weight_group(host, port, world, backend)
        self.group = open_group(host, port, 0, world, backend, timeout_s=timeout_s)
        joined.result(timeout=timeout_s)

    def push(self, weights: PolicyWeights, version: int) -> None:
        """Announce, broadcast, and wait until the receivers have loaded the tensors as ``version``."""
        state = weights.state_dict()
        loaded = self.target.receive_weights(tensor_meta(state), version)
        broadcast_state(self.group, state, self.device)
        loaded.result(timeout=self.timeout_s)
