"""Weight sync over NCCL to a vLLM server's GPU workers (``--weight_sync nccl``; GPU only, untested here).

No folder is written: the trainer (rank 0) and the server's workers (ranks 1..tp) join one
NCCL group (vLLM's ``StatelessProcessGroup`` + ``PyNcclCommunicator``), and each sync
broadcasts every tensor of the (merged) state dict while the workers receive and load it. The
server must run with ``--worker-extension-cls trainers.core.nccl_sync.NCCLWorkerExtension``
(and ``VLLM_SERVER_DEV_MODE=1`` for ``/collective_rpc``), the pattern of vLLM's RLHF examples.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from clawgym_env.errors import ConfigError

if TYPE_CHECKING:
    from clawgym_env._sync import LoopThread
    from trainers.core.weight_sync import PolicyWeights

__all__ = ["NCCLBroadcast", "NCCLWorkerExtension"]


class NCCLBroadcast:
    """Trainer side: rank 0 of a group with the server's workers; ``push`` broadcasts the state dict."""

    def __init__(self, backend: Any, loop: LoopThread, *, host: str = "127.0.0.1", port: int = 51216, workers: int = 1) -> None:
        if not torch.cuda.is_available():
            raise ConfigError("--weight_sync nccl needs a CUDA GPU on the trainer; use --weight_sync auto (folder reload)")
        try:
            from vllm.distributed.device_communicators.pynccl import PyNcclCommunicator
            from vllm.distributed.utils import StatelessProcessGroup
        except ImportError as exc:
            raise ConfigError("--weight_sync nccl needs vLLM installed in the trainer's environment") from exc
        self.backend, self.loop = backend, loop
        init = loop.submit(backend._rpc("init_weight_update_group",
                                        {"host": host, "port": port, "rank_offset": 1, "world_size": workers + 1}))
        group = StatelessProcessGroup.create(host=host, port=port, rank=0, world_size=workers + 1)
        self.comm = PyNcclCommunicator(group, device=torch.device("cuda", torch.cuda.current_device()))
        init.result(timeout=300)

    def push(self, weights: PolicyWeights, version: int) -> None:
        state = {k: v.detach().to("cuda") for k, v in weights.state_dict().items()}
        meta = [(k, str(v.dtype).removeprefix("torch."), list(v.shape)) for k, v in state.items()]
        done = self.loop.submit(self.backend._rpc("receive_weights", {"meta": meta}))  # workers wait on the broadcasts
        for tensor in state.values():
            self.comm.broadcast(tensor, src=0, stream=torch.cuda.current_stream())
        torch.cuda.synchronize()
        done.result(timeout=600)
        self.loop.run(self.backend._http.request("POST", "/reset_prefix_cache", None, what="vLLM server"))
        self.backend.policy_version = version


class NCCLWorkerExtension:
    """Server side, mixed into each vLLM GPU worker (``--worker-extension-cls``)."""

    device: Any
    model_runner: Any

    def init_weight_update_group(self, host: str, port: int, rank_offset: int, world_size: int) -> None:
        from vllm.distributed.device_communicators.pynccl import PyNcclCommunicator
        from vllm.distributed.parallel_state import get_world_group
        from vllm.distributed.utils import StatelessProcessGroup

        rank = get_world_group().rank + rank_offset
        group = StatelessProcessGroup.create(host=host, port=port, rank=rank, world_size=world_size)
        self._clawgym_comm = PyNcclCommunicator(group, device=self.device)

    def receive_weights(self, meta: list[tuple[str, str, list[int]]]) -> None:
        for name, dtype, shape in meta:
            tensor = torch.empty(shape, dtype=getattr(torch, dtype), device="cuda")
            self._clawgym_comm.broadcast(tensor, src=0, stream=torch.cuda.current_stream())
            self.model_runner.model.load_weights(weights=[(name, tensor)])
        torch.cuda.synchronize()
