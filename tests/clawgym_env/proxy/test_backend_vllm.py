"""VLLMBackend against a fake-vLLM: a local starlette server speaking vLLM's exact token-id API.

The fake (named as such: real vLLM needs a GPU) answers ``/v1/completions`` in vLLM's response
shape (``choices[0].token_ids``, ``prompt_token_ids``, ``logprobs.token_logprobs``,
``"token_id:N"`` tokens), ``/health``, ``/collective_rpc`` and ``/reset_prefix_cache``, sampling
with an HFBackend on the tiny model, so ids and logprobs are real.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

import pytest
import torch
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from transformers import AutoModelForCausalLM

from clawgym_env.errors import ConfigError, PolicyBackendError, UpstreamTimeout
from clawgym_env.models.tiny import build_tiny_model
from clawgym_env.proxy.backends.base import CompletionRequest
from clawgym_env.proxy.backends.hf import HFBackend
from clawgym_env.proxy.backends.vllm import VLLMBackend, launch_vllm_server, vllm_command, wait_for_server


class FakeVLLM:
    """State of one fake-vLLM server: its policy, what it received, its weights path."""

    def __init__(self, model_path: Path, *, legacy: bool = False, delay_s: float = 0.0) -> None:
        self.backend = HFBackend(model_path)
        self.model_path = str(model_path)
        self.legacy = legacy  # behave like vLLM < 0.10.2: no token_ids fields
        self.delay_s = delay_s
        self.received: list[dict[str, Any]] = []
        self.rpcs: list[dict[str, Any]] = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/completions", self.completions, methods=["POST"]),
                Route("/health", lambda r: Response(status_code=200), methods=["GET"]),
                Route("/collective_rpc", self.collective_rpc, methods=["POST"]),
                Route("/reset_prefix_cache", lambda r: Response(status_code=200), methods=["POST"]),
            ]
        )

    async def completions(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.received.append(body)
        prompt = body.get("prompt")
        if not isinstance(prompt, list) or not all(isinstance(i, int) for i in prompt):
            err = {"message": "prompt must be token ids in this fake", "type": "BadRequestError", "param": None, "code": 400}
            return JSONResponse({"error": err}, status_code=400)
        await asyncio.sleep(self.delay_s)
        req = CompletionRequest(
            session_id="fake-vllm",
            call_index=len(self.received),
            prompt_ids=prompt,
            messages=[],
            max_tokens=body.get("max_tokens", 16),
            temperature=body.get("temperature", 1.0),
            top_p=body.get("top_p", 1.0),
            stop=body.get("stop") or [],
            seed=body.get("seed"),
        )
        out = await self.backend.handle(req)
        tok = self.backend.tokenizer
        as_ids = body.get("return_tokens_as_token_ids")
        tokens = [f"token_id:{i}" if as_ids else tok.convert_ids_to_tokens(i) for i in out.completion_ids]
        logprobs = None
        if body.get("logprobs") is not None:
            logprobs = {
                "text_offset": list(range(len(tokens))),
                "token_logprobs": out.logprobs,
                "tokens": tokens,
                "top_logprobs": [{t: lp} for t, lp in zip(tokens, out.logprobs, strict=True)],
            }
        with_ids = bool(body.get("return_token_ids")) and not self.legacy
        choice = {
            "index": 0,
            "text": out.text,
            "logprobs": logprobs,
            "finish_reason": out.finish_reason,
            "stop_reason": None,
            "prompt_logprobs": None,
        }
        if not self.legacy:
            choice |= {"token_ids": out.completion_ids if with_ids else None, "prompt_token_ids": prompt if with_ids else None}
        n_out = len(out.completion_ids)
        return JSONResponse(
            {
                "id": f"cmpl-{len(self.received)}",
                "object": "text_completion",
                "created": int(time.time()),
                "model": body.get("model"),
                "choices": [choice],
                "service_tier": None,
                "system_fingerprint": None,
                "usage": {"prompt_tokens": len(prompt), "total_tokens": len(prompt) + n_out, "completion_tokens": n_out,
                          "prompt_tokens_details": None},
                "kv_transfer_params": None,
            }
        )

    async def collective_rpc(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.rpcs.append(body)
        if body["method"] == "update_config":
            self.model_path = body["kwargs"]["overrides"]["model_config"]["model"]
        elif body["method"] == "reload_weights":
            model = AutoModelForCausalLM.from_pretrained(self.model_path)
            self.backend.update_weights(model, version=self.backend.policy_version + 1)
        else:
            return JSONResponse({"error": f"unknown method {body['method']}"}, status_code=400)
        return JSONResponse({"results": [None]})


class ServerThread:
    """uvicorn on 127.0.0.1 (a free port) in a daemon thread."""

    def __init__(self, app: Starlette) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()



@pytest.fixture(scope="module")
def fake_vllm(tiny_model_dir: Path) -> Iterator[tuple[FakeVLLM, str]]:
    fake = FakeVLLM(tiny_model_dir)
    with ServerThread(fake.app()) as srv:
        yield fake, srv.url
    asyncio.run(fake.backend.aclose())


def prompt_ids(tokenizer: Any) -> list[int]:
    text = tokenizer.apply_chat_template([{"role": "user", "content": "count the lines"}], add_generation_prompt=True, tokenize=False)
    return tokenizer.encode(text, add_special_tokens=False)


def req(ids: list[int], **kw: Any) -> CompletionRequest:
    return CompletionRequest(session_id="s", call_index=0, prompt_ids=ids, messages=[], **kw)


async def test_token_ids_in_and_out_with_exact_logprobs(fake_vllm: tuple[FakeVLLM, str], tiny_model_dir: Path) -> None:
    fake, url = fake_vllm
    backend = VLLMBackend(url + "/v1", "tiny", tokenizer_path=tiny_model_dir)
    try:
        ids = prompt_ids(backend.tokenizer)
        out = await backend.handle(req(ids, max_tokens=10, temperature=0.8, top_p=0.95, seed=4, stop=["zzz"]))
        sent = fake.received[-1]
        assert sent["prompt"] == ids and sent["return_token_ids"] is True and sent["logprobs"] == 1
        assert sent["model"] == "tiny" and sent["seed"] == 4 and sent["stop"] == ["zzz"] and sent["top_p"] == 0.95
        direct = await fake.backend.handle(req(ids, max_tokens=10, temperature=0.8, top_p=0.95, seed=4))
        assert out.completion_ids == direct.completion_ids and len(out.completion_ids) == 10
        assert out.logprobs == pytest.approx(direct.logprobs, abs=1e-6)
        assert out.finish_reason == "length" and out.text == direct.text and out.policy_version == 0
        assert out.usage["completion_tokens"] == 10 and out.usage["prompt_tokens"] == len(ids)
        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
        with torch.no_grad():
            lp = torch.log_softmax(model(torch.tensor([ids + out.completion_ids])).logits[0].float(), -1)
        ref = [lp[len(ids) - 1 + i, t].item() for i, t in enumerate(out.completion_ids)]
        assert max(abs(a - b) for a, b in zip(ref, out.logprobs, strict=True)) < 1e-4
    finally:
        await backend.aclose()


async def test_concurrent_calls_each_get_their_own_answer(fake_vllm: tuple[FakeVLLM, str], tiny_model_dir: Path) -> None:
    fake, url = fake_vllm
    backend = VLLMBackend(url, "tiny", tokenizer_path=tiny_model_dir)
    try:
        ids = prompt_ids(backend.tokenizer)
        reqs = [req(ids, max_tokens=3 + i, seed=i) for i in range(6)]
        outs = await asyncio.gather(*(backend.handle(r) for r in reqs))
        assert [len(o.completion_ids) for o in outs] == [3, 4, 5, 6, 7, 8]
        for r, o in zip(reqs, outs, strict=True):
            assert (await fake.backend.handle(r)).completion_ids == o.completion_ids
    finally:
        await backend.aclose()


async def test_older_vllm_without_token_ids_field(tiny_model_dir: Path) -> None:
    fake = FakeVLLM(tiny_model_dir, legacy=True)
    with ServerThread(fake.app()) as srv:
        backend = VLLMBackend(srv.url, "tiny", tokenizer_path=tiny_model_dir)
        ids = prompt_ids(backend.tokenizer)
        out = await backend.handle(req(ids, max_tokens=5, seed=1))
        assert out.completion_ids == (await fake.backend.handle(req(ids, max_tokens=5, seed=1))).completion_ids
        await backend.aclose()
    await fake.backend.aclose()


async def test_reload_weights_through_dev_endpoints(tiny_model_dir: Path, tmp_path: Path) -> None:
    fake = FakeVLLM(tiny_model_dir)
    new_path = build_tiny_model(tmp_path, seed=9)
    with ServerThread(fake.app()) as srv:
        backend = VLLMBackend(srv.url, str(tiny_model_dir))
        ids = prompt_ids(backend.tokenizer)
        before = await backend.handle(req(ids, max_tokens=4, temperature=0.0))
        await backend.reload_weights(new_path, version=7)
        assert [r["method"] for r in fake.rpcs] == ["update_config", "reload_weights"]
        assert fake.rpcs[0]["kwargs"] == {"overrides": {"model_config": {"model": str(new_path)}}}
        after = await backend.handle(req(ids, max_tokens=4, temperature=0.0))
        assert after.policy_version == 7 and before.policy_version == 0
        assert after.logprobs != before.logprobs
        await backend.reload_weights(new_path, version=8)  # same path: reload only
        assert [r["method"] for r in fake.rpcs][2:] == ["reload_weights"]
        await backend.aclose()
    await fake.backend.aclose()


async def test_errors_are_clear(tiny_model_dir: Path) -> None:
    fake = FakeVLLM(tiny_model_dir, delay_s=2.0)
    with ServerThread(fake.app()) as srv:
        slow = VLLMBackend(srv.url, "tiny", timeout=0.3)
        with pytest.raises(UpstreamTimeout, match="did not answer"):
            await slow.handle(req([1, 2, 3], max_tokens=2))
        await slow.aclose()
        with pytest.raises(PolicyBackendError, match="no /collective_rpc|HTTP 4"):
            await VLLMBackend(srv.url + "/nope", "tiny").reload_weights("/x", 1)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead_port = s.getsockname()[1]
    dead = VLLMBackend(f"http://127.0.0.1:{dead_port}", "tiny")
    with pytest.raises(PolicyBackendError, match="unreachable"):
        await dead.handle(req([1, 2], max_tokens=2))
    with pytest.raises(PolicyBackendError, match="prompt_ids"):
        await dead.handle(req([]))
    with pytest.raises(ConfigError, match="tokenizer_path"):
        _ = dead.tokenizer
    await dead.aclose()
    await fake.backend.aclose()


def test_vllm_command_flags(tmp_path: Path) -> None:
    argv = vllm_command(tmp_path, 8123, ["--max-model-len", "4096"], served_model_name="m", vllm_bin="/opt/vllm/bin/vllm")
    assert argv[:3] == ["/opt/vllm/bin/vllm", "serve", str(tmp_path)]
    joined = " ".join(argv)
    for flag in ["--port 8123", "--host 127.0.0.1", "--served-model-name m", "--logprobs-mode raw_logprobs",
                 "--generation-config vllm", "--enable-prefix-caching", "--max-model-len 4096"]:
        assert flag in joined
    with pytest.raises(ConfigError, match="CLAWGYM_VLLM_BIN"):
        launch_vllm_server(tmp_path, 8123, vllm_bin="/nonexistent/vllm")


FAKE_VLLM_CLI = """#!{python}
# fake-vLLM CLI for tests: `serve MODEL --host H --port P ...`, serving FakeVLLM with uvicorn.
import os, sys
sys.path.insert(0, {test_dir!r})
assert os.environ.get("VLLM_SERVER_DEV_MODE") == "1"
args = sys.argv[1:]
model, host, port = args[1], args[args.index("--host") + 1], int(args[args.index("--port") + 1])
import uvicorn
from test_backend_vllm import FakeVLLM
uvicorn.run(FakeVLLM(model).app(), host=host, port=port, log_level="warning")
"""


async def test_launch_vllm_server_starts_waits_and_stops(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The launch path end to end, with the fake-vLLM CLI standing in for the `vllm` executable."""
    cli = tmp_path / "vllm"
    cli.write_text(FAKE_VLLM_CLI.format(python=sys.executable, test_dir=str(Path(__file__).parent)))
    cli.chmod(0o755)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = launch_vllm_server(tiny_model_dir, port, vllm_bin=str(cli), log_path=tmp_path / "vllm.log")
    backend = VLLMBackend(f"http://127.0.0.1:{port}", str(tiny_model_dir), process=proc)
    try:
        await asyncio.to_thread(wait_for_server, backend.base_url, 60.0, proc)
        out = await backend.handle(req(prompt_ids(backend.tokenizer), max_tokens=3, seed=0))
        assert len(out.completion_ids) == 3
    finally:
        await backend.aclose()
    assert proc.poll() is not None


@pytest.mark.gpu
@pytest.mark.slow
async def test_real_vllm_server(tiny_model_dir: Path, tmp_path: Path) -> None:
    """GPU machines only: a real `vllm serve` (its own env, CLAWGYM_VLLM_BIN) on the tiny model.

    Checks token ids in/out, logprobs against a transformers forward pass, and the dev-mode
    weight reload. Never run in CI (no GPU there); unverified until run on a GPU box.
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = launch_vllm_server(tiny_model_dir, port, ["--dtype", "float32", "--max-model-len", "4096",
                                                     "--gpu-memory-utilization", "0.3"], log_path=tmp_path / "vllm.log")
    backend = VLLMBackend(f"http://127.0.0.1:{port}", str(tiny_model_dir), process=proc)
    try:
        await asyncio.to_thread(wait_for_server, backend.base_url, 900.0, proc)
        ids = prompt_ids(backend.tokenizer)
        out = await backend.handle(req(ids, max_tokens=16, temperature=1.0, seed=0))
        assert len(out.completion_ids) == len(out.logprobs) > 0
        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
        with torch.no_grad():
            lp = torch.log_softmax(model(torch.tensor([ids + out.completion_ids])).logits[0].float(), -1)
        ref = [lp[len(ids) - 1 + i, t].item() for i, t in enumerate(out.completion_ids)]
        assert max(abs(a - b) for a, b in zip(ref, out.logprobs, strict=True)) < 1e-2
        new_path = build_tiny_model(tmp_path, seed=9)
        await backend.reload_weights(new_path, version=1)
        again = await backend.handle(req(ids, max_tokens=4, temperature=0.0))
        assert again.policy_version == 1
    finally:
        await backend.aclose()
