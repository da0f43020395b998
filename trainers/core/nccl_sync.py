"""``--weight_sync broadcast`` to a vLLM server: its GPU workers receive the trainer's tensors over NCCL.

The broadcast itself is ``trainers.core.collective_sync`` (the code path the ``--rollout_process``
child runs over gloo on CPU, tested there); this is the vLLM end: the server's workers join the
weight group and load what arrives through the worker extension ``clawgym_vllm_worker.WeightSync``
(``clawgym_join_weight_group``, ``clawgym_receive_weights``), reached by ``/collective_rpc`` with the
scheduler paused, as ``launch_vllm_server`` starts it (dev mode, the extension on its path). GPU
only: not run here (the ``gpu`` test tier).
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import torch

from clawgym_env.errors import ConfigError
from trainers.core.collective_sync import CollectiveBroadcast

if TYPE_CHECKING:
    from clawgym_env._sync import LoopThread
    from clawgym_env.proxy.backends.vllm import VLLMBackend

__all__ = ["VLLMWorkers", "vllm_broadcast"]


class VLLMWorkers:
    """A ``BroadcastTarget``: the workers (tensor-parallel ranks) of one vLLM server, counted by asking it."""

    def __init__(self, backend: VLLMBackend, loop: LoopThread) -> None:
        self.backend, self.loop = backend, loop
        self.workers = loop.run(backend.weight_receivers())

    @property
    def receivers(self) -> int:
        return self.workers

    def join_weight_group(self, host: str, port: int, world_size: int, backend: str) -> Future[None]:
        return self.loop.submit(self.backend.join_weight_group(host, port, world_size, backend))

    def receive_weights(self, meta: list[Any], version: int) -> Future[None]:
        return self.loop.submit(self.backend.receive_weights(meta, version))


def vllm_broadcast(backend: VLLMBackend, loop: LoopThread, device: torch.device) -> CollectiveBroadcast:
    """The broadcast sync to a vLLM server; the trainer must be on CUDA (NCCL to the server's GPU workers)."""
    if device.type != "cuda":
        raise ConfigError(
            "--weight_sync broadcast to a vLLM server needs the trainer on a CUDA GPU (NCCL to its workers); "
            "on CPU use --weight_sync auto (folder reload), or --rollout_process (gloo)"
        )
    return CollectiveBroadcast(VLLMWorkers(backend, loop), device)
