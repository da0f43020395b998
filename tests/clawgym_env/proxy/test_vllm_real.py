"""VLLMBackend and the launcher against a real vLLM CPU server (tier ``vllm``).

The server (``real_vllm``, tests/conftest.py) is started once per session by ``launch_vllm_server``
on the embedded SmolLM2-135M folder. Each test that depends on which weights are served reloads
them first, so the order of tests does not matter.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from clawgym_env.errors import PolicyBackendError
from clawgym_env.proxy.backends.base import CompletionRequest
from clawgym_env.proxy.backends.vllm import VLLMBackend
from clawgym_env.proxy.backends.vllm_server import launch_vllm_server
from tests.conftest import RealVLLM

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def fixed_prompt(tokenizer: Any) -> list[int]:
    text = tokenizer.apply_chat_template([{"role": "user", "content": "Name three colours."}], add_generation_prompt=True, tokenize=False)
    return tokenizer.encode(text, add_special_tokens=False)


def req(ids: list[int], **kw: Any) -> CompletionRequest:
    return CompletionRequest(session_id="s", call_index=0, prompt_ids=ids, messages=[], **kw)


def forward_logprobs(model: Any, prompt: list[int], completion: list[int]) -> list[float]:
    """Logprobs of ``completion`` after ``prompt`` under ``model`` (fp32 transformers forward)."""
    with torch.no_grad():
        lp = torch.log_softmax(model(torch.tensor([prompt + completion])).logits[0].float(), -1)
    return [lp[len(prompt) - 1 + i, t].item() for i, t in enumerate(completion)]


def max_delta(a: list[float], b: list[float]) -> float:
    return max(abs(x - y) for x, y in zip(a, b, strict=True))


def perturbed(model_path: Path, out: Path, seed: int, scale: float = 0.02) -> Any:
    """A copy of the model with noise on every weight, saved to ``out`` (what a training step writes)."""
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * scale * p.abs().mean())
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(model_path).save_pretrained(out)
    return model


async def served_logprobs(backend: VLLMBackend, ids: list[int]) -> tuple[list[int], list[float]]:
    out = await backend.handle(req(ids, max_tokens=12, temperature=0.0))
    assert len(out.completion_ids) == len(out.logprobs) > 0
    return out.completion_ids, out.logprobs


async def test_token_ids_and_logprobs_match_a_transformers_forward(real_vllm: RealVLLM) -> None:
    backend = VLLMBackend(real_vllm.url, str(real_vllm.model_path))
    try:
        await backend.reload_weights(real_vllm.model_path, version=0)
        ids = fixed_prompt(backend.tokenizer)
        out = await backend.handle(req(ids, max_tokens=16, temperature=1.0, seed=3))
        assert len(out.completion_ids) == len(out.logprobs) > 0 and out.usage["prompt_tokens"] == len(ids)
        model = AutoModelForCausalLM.from_pretrained(real_vllm.model_path, dtype=torch.float32)
        assert max_delta(forward_logprobs(model, ids, out.completion_ids), out.logprobs) < 1e-3
    finally:
        await backend.aclose()


async def test_reload_onto_a_new_folder_then_the_same_folder_rewritten(real_vllm: RealVLLM, tmp_path: Path) -> None:
    """The two syncs training does: a new folder, then the same folder with new weights in it."""
    backend = VLLMBackend(real_vllm.url, str(real_vllm.model_path))
    try:
        await backend.reload_weights(real_vllm.model_path, version=0)
        ids = fixed_prompt(backend.tokenizer)
        base_ids, base_lp = await served_logprobs(backend, ids)
        folder = tmp_path / "policy-latest"
        first = perturbed(real_vllm.model_path, folder, seed=1)
        t0 = time.monotonic()
        await backend.reload_weights(folder, version=1)
        new_folder_s = time.monotonic() - t0
        got_ids, got_lp = await served_logprobs(backend, ids)
        assert max_delta(forward_logprobs(first, ids, got_ids), got_lp) < 1e-3
        assert max_delta(forward_logprobs(first, ids, base_ids), base_lp) > 1e-2  # the weights did change
        second = perturbed(real_vllm.model_path, folder, seed=2)  # same path, new content
        t0 = time.monotonic()
        await backend.reload_weights(folder, version=2)
        same_folder_s = time.monotonic() - t0
        again_ids, again_lp = await served_logprobs(backend, ids)
        assert max_delta(forward_logprobs(second, ids, again_ids), again_lp) < 1e-3
        assert max_delta(forward_logprobs(first, ids, again_ids), again_lp) > 1e-2
        assert (await backend.handle(req(ids, max_tokens=2))).policy_version == 2
        print(f"reload: new folder {new_folder_s:.1f} s, same folder {same_folder_s:.1f} s")
    finally:
        await backend.reload_weights(real_vllm.model_path, version=0)
        await backend.aclose()


async def test_reload_after_30_s_idle(real_vllm: RealVLLM) -> None:
    """The kept-alive connection from the first call is closed by the server meanwhile (uvicorn: 5 s)."""
    backend = VLLMBackend(real_vllm.url, str(real_vllm.model_path))
    try:
        ids = fixed_prompt(backend.tokenizer)
        await backend.reload_weights(real_vllm.model_path, version=0)
        before = await served_logprobs(backend, ids)
        await asyncio.sleep(30)
        await backend.reload_weights(real_vllm.model_path, version=1)
        after = await served_logprobs(backend, ids)
        assert after[0] == before[0] and max_delta(after[1], before[1]) < 1e-5
    finally:
        await backend.aclose()


def test_a_failed_start_reports_the_servers_own_error(tmp_path: Path) -> None:
    """A context past the model's own, without vLLM's override: it refuses, and the error quotes its reason."""
    import socket

    from clawgym_env.models.smollm2 import default_model_path

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = launch_vllm_server(default_model_path(), port, ["--max-model-len", "100000"], log_path=tmp_path / "bad.log")
    try:
        with pytest.raises(PolicyBackendError, match="exited with code") as info:
            server.wait_ready(timeout=600)
    finally:
        server.stop()
    message = str(info.value)
    assert "max_model_len" in message.replace("-", "_").lower() and "100000" in message and str(tmp_path / "bad.log") in message


async def test_the_served_context_bounds_prompts_and_completions(real_vllm: RealVLLM) -> None:
    """A prompt with no room left is ``PromptTooLong`` (the proxy's 400) before it is sent; one that leaves
    3 tokens of room, asking for 64, gets at most 3 (vLLM cuts max_tokens itself, as HFBackend does)."""
    from clawgym_env.errors import PromptTooLong
    from tests.conftest import VLLM_CONTEXT

    backend = VLLMBackend(real_vllm.url, str(real_vllm.model_path))
    try:
        assert await backend.context_length() == VLLM_CONTEXT
        ids = fixed_prompt(backend.tokenizer)
        filler = (ids * (VLLM_CONTEXT // len(ids) + 1))[:VLLM_CONTEXT]
        with pytest.raises(PromptTooLong, match=f"prompt is too long: {VLLM_CONTEXT} tokens > {VLLM_CONTEXT - 1} maximum"):
            await backend.handle(req(filler, max_tokens=8))
        # past SmolLM2's trained 8,192 positions its logprobs may not be finite (vLLM then fails to encode its
        # answer), so only the length is read, over the raw HTTP answer
        body = {**backend.request_body(req(filler[: VLLM_CONTEXT - 3], max_tokens=64, temperature=0.0)), "logprobs": None}
        data = await backend._http.request("POST", "/v1/completions", body, what="vLLM server")
        assert 0 < len(data["choices"][0]["token_ids"]) <= 3
    finally:
        await backend.aclose()
