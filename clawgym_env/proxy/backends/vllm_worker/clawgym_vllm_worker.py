"""vLLM worker extension (runs in vLLM's venv): reload weights from a folder, completely.

vLLM 0.32's ``Worker.reload_weights(weights_path=...)`` reloads every layer in place, but on the
CPU build a tied LM head (SmolLM2, most small models) keeps serving the old weights: at load time
its matmul is packed into a oneDNN handle from the (tied) embedding, and the reload does not
rebuild that handle ("ParallelLMHead: Failed to load weights" in the server log), so logits come
from the old output projection while everything before it is new. ``clawgym_reload_weights``
reloads, then rebuilds the packed matmul of every layer that keeps its weight next to one.
Standalone on purpose: only vLLM and torch are importable in that environment.
"""

from __future__ import annotations

from typing import Any


class WeightSync:
    """Mixed into vLLM's worker class (``--worker-extension-cls clawgym_vllm_worker.WeightSync``)."""

    def clawgym_reload_weights(self: Any, weights_path: str) -> int:
        """Reload all weights from ``weights_path``; return how many packed layers were rebuilt."""
        self.reload_weights(weights_path=weights_path)
        return _rebuild_packed(self)

    def clawgym_worker_rank(self: Any) -> int:
        """This worker's rank in the server (one answer per worker: their count is the weight group's receivers)."""
        from vllm.distributed.parallel_state import get_world_group

        return int(get_world_group().rank)

    def clawgym_join_weight_group(self: Any, host: str, port: int, world_size: int, backend: str) -> int:
        """Join the trainer's weight group (``--weight_sync broadcast``) as rank 1 + this worker's rank; return it."""
        from clawgym_weight_group import open_group
        from vllm.distributed.parallel_state import get_world_group

        rank = 1 + get_world_group().rank
        self.clawgym_weight_group = open_group(host, port, rank, world_size, backend)
        return rank

    def clawgym_receive_weights(self: Any, meta: list[Any]) -> int:
        """Receive the announced tensors from the trainer's broadcast and load each; return how many."""
        from clawgym_weight_group import receive_state

        model = self.model_runner.get_model()
        count = 0
        for name, tensor in receive_state(self.clawgym_weight_group, meta, self.device):
            model.load_weights(weights=[(name, tensor)])
            count += 1
        _rebuild_packed(self)
        return count


def _rebuild_packed(worker: Any) -> int:
    """Rebuild the packed matmul of layers that keep their weight next to one (CPU build); return how many."""
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return 0
    from vllm.config import set_current_vllm_config

    rebuilt = 0
    with set_current_vllm_config(worker.vllm_config):
        for module in worker.model_runner.get_model().modules():
            weight = getattr(module, "weight", None)
            method = getattr(module, "quant_method", None)
            # layers that pack a copy and keep their weight (embedding / LM head); linear
            # layers drop theirs (an empty tensor) and were rebuilt by the reload itself
            if hasattr(module, "cpu_linear") and weight is not None and weight.ndim == 2 and weight.numel() and method:
                method.process_weights_after_loading(module)
                rebuilt += 1
    return rebuilt
