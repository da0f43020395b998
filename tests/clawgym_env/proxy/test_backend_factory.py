"""backend_from_spec: every documented form builds the right backend; bad specs list the forms."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from pathlib import Path

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from clawgym_env.errors import ConfigError
from clawgym_env.models.smollm2 import default_model_path
from clawgym_env.models.testing import tiny_model_path
from clawgym_env.proxy.backends.base import CompletionRequest
from clawgym_env.proxy.backends.factory import backend_from_spec
from clawgym_env.proxy.backends.hf import HFBackend
from clawgym_env.proxy.backends.passthrough import AnthropicPassthrough, OpenAIPassthrough
from clawgym_env.proxy.backends.vllm import VLLMBackend


def test_hf_specs() -> None:
    tiny = backend_from_spec("hf:tiny?max_batch=2&seed=3", logprobs_mode="tempered")
    assert isinstance(tiny, HFBackend) and tiny.model_path == tiny_model_path()
    assert (tiny.max_batch, tiny.seed, tiny.logprobs_mode) == (2, 3, "tempered")
    by_path = backend_from_spec(f"hf:{tiny_model_path()}")
    assert isinstance(by_path, HFBackend) and by_path.tokenizer is not None
    default = backend_from_spec("default")
    assert isinstance(default, HFBackend) and default.model_path == default_model_path()
    for b in (tiny, by_path, default):
        asyncio.run(b.aclose())


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("hf", "missing the kind"),
        ("hff:tiny", "did you mean hf"),
        ("hf:", "nothing after"),
        ("hf:/no/such/model", "no config.json"),
        ("hf:tiny?colour=red", "unknown hf option"),
        ("hf:tiny?max_batch=many", "not a int"),
        ("vllm:/no/such/model", "neither an http"),
        ("openai:gpt-4o", "needs a base URL and a model"),
        ("anthropic:https://api.anthropic.com", "needs a base URL and a model"),
        ("scripted:/no/such/script.yaml", "does not exist"),
    ],
)
def test_bad_specs_name_the_forms(spec: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as info:
        backend_from_spec(spec)
    if not spec.startswith("scripted"):
        assert "vllm:URL[#MODEL]" in str(info.value)


def test_vllm_url_spec_with_and_without_model() -> None:
    app = Starlette(routes=[Route("/v1/models", lambda r: JSONResponse({"object": "list", "data": [{"id": str(tiny_model_path())}]}))])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    try:
        named = backend_from_spec(f"vllm:{url}/v1#served-name", tokenizer_path=tiny_model_path())
        assert isinstance(named, VLLMBackend) and named.model == "served-name" and named.base_url == url
        asked = backend_from_spec(f"vllm:{url}")  # model read from /v1/models; a folder, so it is the tokenizer too
        assert isinstance(asked, VLLMBackend) and asked.model == str(tiny_model_path())
        assert asked.tokenizer.eos_token == "<|im_end|>"
        with pytest.raises(ConfigError, match="add #MODEL"):  # a server answers, but not with a model list
            backend_from_spec(f"vllm:{url}/elsewhere")
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
    with pytest.raises(ConfigError, match=r"no server answers at .*/v1/models .*Fix: start the vLLM server"):
        backend_from_spec(f"vllm:{url}")  # server gone


def test_vllm_path_spec_without_vllm_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAWGYM_VLLM_BIN", "/nonexistent/vllm")
    with pytest.raises(ConfigError, match="CLAWGYM_VLLM_BIN"):
        backend_from_spec(f"vllm:{tiny_model_path()}")


def test_api_specs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ak-env")
    o = backend_from_spec("openai:https://api.openai.com/v1#gpt-4o-mini")
    assert isinstance(o, OpenAIPassthrough) and (o.base_url, o.model, o.api_key) == ("https://api.openai.com/v1", "gpt-4o-mini", "sk-env")
    a = backend_from_spec("anthropic:https://api.anthropic.com#claude-x", api_key="explicit")
    assert isinstance(a, AnthropicPassthrough) and (a.base_url, a.model, a.api_key) == (
        "https://api.anthropic.com/v1",
        "claude-x",
        "explicit",
    )


async def test_scripted_spec(tmp_path: Path) -> None:
    script = tmp_path / "script.yaml"
    script.write_text("replies:\n  - first answer\n  - second answer\n")
    b = backend_from_spec(f"scripted:{script}")
    r = CompletionRequest(session_id="s", call_index=0, prompt_ids=None, messages=[{"role": "user", "content": "hi"}])
    assert (await b.handle(r)).text == "first answer"
    assert (await b.handle(r)).text == "second answer"


def test_errors_name_the_flag_the_spec_came_from(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^--model 'foo:x': unknown kind"):
        backend_from_spec("foo:x")
    with pytest.raises(ConfigError, match=r"^--judge 'foo:x': unknown kind 'foo'\. A policy spec is one of"):
        backend_from_spec("foo:x", option="--judge")
    with pytest.raises(ConfigError, match=r"^--judge 'scripted:.*': scripted backend: script file .* does not exist"):
        backend_from_spec(f"scripted:{tmp_path / 'none.yaml'}", option="--judge")
