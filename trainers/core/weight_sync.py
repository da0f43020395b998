"""One way to give the rollout side new policy weights: the ``WeightSync`` protocol.

The trainer hands a sync the policy (``PolicyWeights``: full state dict under plain Hugging Face
names, merged when training a LoRA adapter) and the new version number; captures sampled after
the push carry that version, which is what staleness and the truncated IS weights are measured
against. Which sync a run uses follows from where its rollouts are sampled (``weight_sync_for``):

- ``InProcessCopy``: the trainer's own HF backend (local executor): a state-dict copy under the
  backend's lock, between two generation batches (in the backend's child process with
  ``--rollout_process``).
- ``ExecutorCopy``: every worker of an executor holds its own HF backend (Ray: one per node);
  the state dict goes once into the object store and each node loads it.
- ``ServerReload``: a vLLM server: the policy is written to ``<output_dir>/policy-latest`` and
  the server reloads it (``VLLMBackend.reload_weights``).
- ``CollectiveBroadcast`` (``--weight_sync broadcast``, ``trainers.core.collective_sync``): tensors
  broadcast over a process group with the rollout processes, gloo on CPU and NCCL on CUDA: to the
  ``--rollout_process`` child, or to a vLLM server's GPU workers (``trainers.core.nccl_sync``).
- ``FixedPolicy``: a scripted policy has no weights; nothing moves (tests, off-policy warm starts).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from clawgym_env.errors import ConfigError

if TYPE_CHECKING:
    import torch

    from clawgym_env._sync import LoopThread
    from clawgym_env.executors import Executor
    from clawgym_env.proxy.backends.base import PolicyBackend

__all__ = ["ExecutorCopy", "FixedPolicy", "InProcessCopy", "PolicyWeights", "ServerReload", "WeightSync", "weight_sync_for"]


@dataclass(frozen=True)
class PolicyWeights:
    """The policy as a sync reads it; both callables give the merged, plain-named weights."""

    state_dict: Callable[[], dict[str, torch.Tensor]]
    save_pretrained: Callable[[Path], None]


class WeightSync(Protocol):
    """Moves the trainer's weights to wherever rollouts are sampled."""

    def push(self, weights: PolicyWeights, version: int) -> None: ...


class InProcessCopy:
    """The HF backend in this process: copy the state dict (between generation batches)."""

    def __init__(self, backend: PolicyBackend) -> None:
        self.backend = backend

    def push(self, weights: PolicyWeights, version: int) -> None:
        self.backend.update_weights(weights.state_dict(), version)


class ExecutorCopy:
    """Every worker of the executor loads the state dict into its own HF backend."""

    def __init__(self, executor: Executor, loop: LoopThread) -> None:
        self.executor = executor
        self.loop = loop

    def push(self, weights: PolicyWeights, version: int) -> None:
        self.loop.run(self.executor.update_weights(weights.state_dict(), version))


class ServerReload:
    """A vLLM server: write the policy to ``folder`` and ask the server to reload it."""

    def __init__(self, backend: PolicyBackend, folder: Path, loop: LoopThread) -> None:
        self.backend = backend
        self.folder = folder
        self.loop = loop

    def push(self, weights: PolicyWeights, version: int) -> None:
        weights.save_pretrained(self.folder)
        self.loop.run(self.backend.reload_weights(self.folder, version))


class FixedPolicy:
    """A scripted policy: there are no weights to move; its captures carry no version."""

    def push(self, weights: PolicyWeights, version: int) -> None:
        return None


def weight_sync_for(
    backend: PolicyBackend, *, folder: Path, loop: LoopThread, broadcast: bool = False, device: torch.device | None = None
) -> WeightSync:
    """The sync for the rollout ``backend`` a local executor samples from (Ray workers: ``ExecutorCopy``), chosen
    by what the backend declares (``PolicyBackend.WEIGHT_UPDATE``).

    ``broadcast``: tensors over a process group from the trainer's ``device`` (gloo on CPU, NCCL on CUDA).
    """
    import torch

    from trainers.core.rollout_process import ChildHFBackend

    device = device if device is not None else torch.device("cpu")
    if backend.WEIGHT_UPDATE == "reload":  # a server reads the policy: a saved folder, or a broadcast to its workers
        if broadcast:
            from clawgym_env.proxy.backends.vllm import VLLMBackend
            from trainers.core.nccl_sync import vllm_broadcast

            if not isinstance(backend, VLLMBackend):  # the broadcast goes through vLLM's worker extension
                raise ConfigError(
                    f"--weight_sync broadcast reaches a vLLM server's workers; {type(backend).__name__} "
                    "reloads from a folder: drop --weight_sync broadcast"
                )
            return vllm_broadcast(backend, loop, device)
        return ServerReload(backend, folder, loop)
    if broadcast:
        if not isinstance(backend, ChildHFBackend):
            raise ConfigError(
                "--weight_sync broadcast sends tensors to rollout processes: set --rollout_process (hf: policy "
                "in a child process) or --rollout_backend vllm:...; or drop it"
            )
        from trainers.core.collective_sync import CollectiveBroadcast

        return CollectiveBroadcast(backend, device)
    if backend.WEIGHT_UPDATE == "copy":
        return InProcessCopy(backend)
    if backend.WEIGHT_UPDATE == "fixed":
        return FixedPolicy()
    raise ConfigError(f"rollout backend {type(backend).__name__} cannot take new weights; use an hf: or vllm: backend")
