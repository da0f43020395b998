"""``--weight_sync broadcast`` over gloo: the trainer broadcasts tensors to the ``--rollout_process`` child,
which then samples with them (the code path a GPU run takes over NCCL, which stays in the gpu tier)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch

from clawgym_env.errors import ConfigError
from clawgym_env.proxy.backends.base import CompletionRequest
from trainers.core.collective_sync import CollectiveBroadcast
from trainers.core.rollout_process import ChildHFBackend
from trainers.core.weight_sync import PolicyWeights, weight_sync_for

PROMPT = [1, 5, 9, 14, 3, 22, 7]


def _sample(child: ChildHFBackend, call: int) -> tuple[list[int], list[float], int | None]:
    req = CompletionRequest(session_id="s-1", call_index=call, prompt_ids=PROMPT, messages=[], max_tokens=12, seed=call)
    done = asyncio.run(child.handle(req))
    assert done.completion_ids and done.logprobs is not None
    return done.completion_ids, done.logprobs, done.policy_version


def _trainer_logprobs(model: torch.nn.Module, completion: list[int]) -> torch.Tensor:
    ids = torch.tensor([PROMPT + completion], device=model.device)
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids).logits[0].float(), -1)
    return logp[len(PROMPT) - 1 : -1].gather(-1, torch.tensor(completion, device=model.device)[:, None])[:, 0].cpu()


def _step(model: torch.nn.Module) -> None:
    """One real AdamW step on a next-token loss (the weights the trainer would sync)."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ids = torch.tensor([PROMPT * 3], device=model.device)
    loss = torch.nn.functional.cross_entropy(model(input_ids=ids).logits[0, :-1], ids[0, 1:])
    loss.backward()
    opt.step()


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_broadcast_to_the_rollout_child_then_it_serves_the_trainers_weights(tiny_path: Path, device: str) -> None:
    """gloo on CPU (CI); the same test over NCCL with trainer and child on a GPU (gpu tier)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_path, dtype=torch.float32).to(device)
    weights = PolicyWeights(state_dict=model.state_dict, save_pretrained=model.save_pretrained)
    child = ChildHFBackend(f"hf:{tiny_path}?seed=0&device={device}", tiny_path)
    try:
        sync = CollectiveBroadcast(child, torch.device(device))
        assert sync.group.size() == 2
        assert type(sync.group).__name__ == ("ProcessGroupNCCL" if device == "cuda" else "ProcessGroupGloo")
        before, _, version = _sample(child, 0)
        assert version == 0
        for v in (1, 2):  # two pushes: each one loads, and the version follows
            _step(model)
            sync.push(weights, v)
            assert child.policy_version == v
            ids, logprobs, version = _sample(child, v)
            assert version == v
            assert torch.allclose(torch.tensor(logprobs), _trainer_logprobs(model, ids), atol=1e-5, rtol=0)
        # the child's first completion is no longer likely as it was: the steps changed what it serves
        assert float((_trainer_logprobs(model, before) - torch.tensor(_sample_logprobs_at_v0(tiny_path, before))).abs().max()) > 1e-3
    finally:
        asyncio.run(child.aclose())


def _sample_logprobs_at_v0(tiny_path: Path, completion: list[int]) -> list[float]:
    from transformers import AutoModelForCausalLM

    return _trainer_logprobs(AutoModelForCausalLM.from_pretrained(tiny_path, dtype=torch.float32), completion).tolist()


def test_broadcast_needs_a_rollout_side_in_another_process(tiny_path: Path) -> None:
    from clawgym_env.proxy.backends.hf import HFBackend

    backend = HFBackend(tiny_path, seed=0)
    try:
        with pytest.raises(ConfigError, match="--rollout_process"):
            weight_sync_for(backend, folder=tiny_path, loop=None, broadcast=True)  # type: ignore[arg-type]
    finally:
        asyncio.run(backend.aclose())


def test_broadcast_to_vllm_needs_the_trainer_on_cuda() -> None:
    from trainers.core.nccl_sync import vllm_broadcast

    with pytest.raises(ConfigError, match="CUDA GPU"):
        vllm_broadcast(None, None, torch.device("cpu"))  # type: ignore[arg-type]
