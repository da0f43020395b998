"""Bad input, bad keys, failing backends and vanishing clients get clear errors; the server stays healthy."""

from __future__ import annotations

import asyncio

import anthropic
import httpx
import openai
import pytest

from clawgym_env.errors import PolicyBackendError
from clawgym_env.proxy import ProxyServer, ScriptedBackend

USER = [{"role": "user", "content": "hi"}]


async def healthy(server: ProxyServer) -> None:
    sess = server.open_session(ScriptedBackend(["still fine"]))
    c = anthropic.AsyncAnthropic(base_url=server.url, api_key=sess.api_key, max_retries=0)
    r = await c.messages.create(model="m", max_tokens=8, messages=USER)
    assert r.content[0].text == "still fine"


async def test_unknown_and_foreign_keys_are_refused_and_recorded(server: ProxyServer) -> None:
    a = server.open_session(ScriptedBackend(["a"]), session_id="ep-a")
    b = server.open_session(ScriptedBackend(["b"]), session_id="ep-b")
    bad = anthropic.AsyncAnthropic(base_url=server.url, api_key="sk-wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        await bad.messages.create(model="m", max_tokens=8, messages=USER)
    # b's key on a's pinned path: refused, recorded against a
    foreign = openai.AsyncOpenAI(base_url=f"{server.url}/s/ep-a/v1", api_key=b.api_key, max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        await foreign.chat.completions.create(model="m", messages=USER)
    own = openai.AsyncOpenAI(base_url=f"{server.url}/s/ep-a/v1", api_key=a.api_key, max_retries=0)
    assert (await own.chat.completions.create(model="m", messages=USER)).choices[0].message.content == "a"
    assert [r.status for r in server.refused] == [401, 401]
    assert len(a.refused) == 1 and "another session" in (a.refused[0].error or "")
    assert [c.status for c in a.calls] == [200] and b.calls == []
    async with httpx.AsyncClient(base_url=server.url) as h:
        r = await h.post("/v1/messages", json={"messages": USER})
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"


async def test_malformed_json_wrong_type_oversized_and_unknown_paths(tmp_path) -> None:
    async with ProxyServer(max_body_bytes=10_000) as server:
        sess = server.open_session(ScriptedBackend([], default="x"))
        hdr = {"x-api-key": sess.api_key}
        async with httpx.AsyncClient(base_url=server.url) as h:
            r = await h.post("/v1/messages", content=b"{not json", headers={**hdr, "content-type": "application/json"})
            assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
            assert "not valid JSON" in r.json()["error"]["message"]
            r = await h.post(
                "/v1/chat/completions",
                content=b"a=b",
                headers={"authorization": f"Bearer {sess.api_key}", "content-type": "application/x-www-form-urlencoded"},
            )
            assert r.status_code == 415 and "application/json" in r.json()["error"]["message"]
            r = await h.post("/v1/messages", json={"messages": [{"role": "user", "content": "x" * 20_000}]}, headers=hdr)
            assert r.status_code == 413 and r.json()["error"]["type"] == "request_too_large"
            r = await h.post("/v1/messages", json={"model": "m"}, headers=hdr)
            assert r.status_code == 400 and "messages" in r.json()["error"]["message"]
            r = await h.post("/v1/messages", json={"messages": [{"role": "robot", "content": "x"}]}, headers=hdr)
            assert r.status_code == 400 and "role" in r.json()["error"]["message"]
            r = await h.post("/v1/embeddings", json={}, headers={"authorization": "Bearer x"})
            assert r.status_code == 404 and "error" in r.json() and "/v1/embeddings" in r.json()["error"]["message"]
            r = await h.post("/v1/messages/batches", json={}, headers=hdr)
            assert r.status_code == 404 and r.json()["type"] == "error"
            r = await h.get("/v1/messages", headers=hdr)
            assert r.status_code == 405

            # chunked body (no content-length) over the limit
            async def gen():
                for _ in range(20):
                    yield b" " * 1000

            r = await h.post("/v1/messages", content=gen(), headers={**hdr, "content-type": "application/json"})
            assert r.status_code == 413
        assert [c.status for c in sess.calls] == [400, 400]  # only parsed-but-invalid bodies are calls
        await healthy(server)


async def test_backend_exception_becomes_dialect_error_and_is_recorded(server: ProxyServer) -> None:
    def boom(request):
        raise RuntimeError("GPU on fire")

    sess = server.open_session(ScriptedBackend(boom))
    c = anthropic.AsyncAnthropic(base_url=server.url, api_key=sess.api_key, max_retries=0)
    with pytest.raises(anthropic.InternalServerError) as err:
        await c.messages.create(model="m", max_tokens=8, messages=USER)
    assert "GPU on fire" in str(err.value)
    o = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key=sess.api_key, max_retries=0)
    with pytest.raises(openai.InternalServerError):
        await o.chat.completions.create(model="m", messages=USER, stream=True)
    assert [(r.status, r.finish_reason) for r in sess.calls] == [(500, "error"), (500, "error")]
    assert "RuntimeError: GPU on fire" in (sess.calls[0].error or "")
    await healthy(server)


async def test_script_exhausted_is_a_policy_backend_error(server: ProxyServer) -> None:
    backend = ScriptedBackend(["only one"])
    sess = server.open_session(backend)
    c = anthropic.AsyncAnthropic(base_url=server.url, api_key=sess.api_key, max_retries=0)
    await c.messages.create(model="m", max_tokens=8, messages=USER)
    with pytest.raises(anthropic.InternalServerError, match="script exhausted"):
        await c.messages.create(model="m", max_tokens=8, messages=USER)
    assert PolicyBackendError.__name__ in (sess.calls[1].error or "")


async def test_max_calls_sets_over_limit(server: ProxyServer) -> None:
    sess = server.open_session(ScriptedBackend([], default="again"), max_calls=2)
    c = anthropic.AsyncAnthropic(base_url=server.url, api_key=sess.api_key, max_retries=0)
    for _ in range(2):
        await c.messages.create(model="m", max_tokens=8, messages=USER)
    assert not sess.over_limit
    with pytest.raises(anthropic.BadRequestError, match="call budget"):
        await c.messages.create(model="m", max_tokens=8, messages=USER)
    assert sess.over_limit and [r.status for r in sess.calls] == [200, 200, 400]


async def test_client_disconnect_while_waiting_is_recorded(server: ProxyServer) -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def slow(request):  # suspends after the proxy ran it eagerly: the rest continues in a task
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    sess = server.open_session(ScriptedBackend(slow))
    c = anthropic.AsyncAnthropic(base_url=server.url, api_key=sess.api_key, max_retries=0)
    task = asyncio.create_task(c.messages.create(model="m", max_tokens=8, messages=USER, stream=True))
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()  # the SDK closes the connection
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(200):
        if sess.calls:
            break
        await asyncio.sleep(0.01)
    (rec,) = sess.calls
    assert rec.status == 499 and "disconnected" in (rec.error or "")
    assert cancelled.is_set()  # the hang-up reached the policy's await: no work left running
    await healthy(server)


async def test_client_disconnect_mid_stream_leaves_server_healthy(server: ProxyServer) -> None:
    sess = server.open_session(ScriptedBackend([{"text": "x" * 200_000}]))
    async with httpx.AsyncClient(base_url=server.url) as h:
        async with h.stream(
            "POST",
            "/v1/messages",
            headers={"x-api-key": sess.api_key},
            json={"model": "m", "max_tokens": 8, "messages": USER, "stream": True},
        ) as r:
            async for line in r.aiter_lines():
                assert line.startswith("event: message_start")
                break  # hang up after the first event
    await healthy(server)
    assert sess.calls[0].stream is True


async def test_slow_policy_keeps_streams_alive_and_errors_arrive_in_stream(tmp_path) -> None:
    async def slow(request):
        await asyncio.sleep(0.35)
        if request.call_index >= 2:
            raise RuntimeError("fell over late")
        return {"text": "slow but sure", "tool_calls": [{"name": "Write", "arguments": {"file_path": "a"}}]}

    async with ProxyServer(stream_keepalive_s=0.1) as server:
        sess = server.open_session(ScriptedBackend(slow))
        c = anthropic.AsyncAnthropic(base_url=server.url, api_key=sess.api_key, max_retries=0)
        async with c.messages.stream(model="m", max_tokens=8, messages=USER) as s:
            final = await s.get_final_message()
        assert [b.type for b in final.content] == ["text", "tool_use"] and final.stop_reason == "tool_use"
        async with httpx.AsyncClient(base_url=server.url) as h:
            r = await h.post(
                "/v1/chat/completions",
                headers={"authorization": f"Bearer {sess.api_key}"},
                json={"model": "m", "stream": True, "messages": USER},
            )
        assert r.text.startswith(": keep-alive\n\n") and r.text.rstrip().endswith("data: [DONE]")
        o = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key=sess.api_key, max_retries=0)
        with pytest.raises(openai.APIError, match="fell over late"):
            async for _ in await o.chat.completions.create(model="m", messages=USER, stream=True):
                pass
        with pytest.raises(anthropic.APIError, match="fell over late"):
            async with c.messages.stream(model="m", max_tokens=8, messages=USER) as s:
                await s.get_final_message()
        assert [r.status for r in sess.calls] == [200, 200, 500, 500]
        await healthy(server)


async def test_gemini_streams_stay_alive_through_a_slow_policy() -> None:
    """google-genai parses every non-blank SSE line as JSON: its keep-alive is a blank line, not a comment."""
    from google import genai
    from google.genai import types

    async def slow(request):
        await asyncio.sleep(0.35)
        return {"text": "slow but sure"}

    async with ProxyServer(stream_keepalive_s=0.1) as server:
        sess = server.open_session(ScriptedBackend(slow))
        c = genai.Client(api_key=sess.api_key, http_options=types.HttpOptions(base_url=server.url)).aio
        chunks = [ch async for ch in await c.models.generate_content_stream(model="m", contents="hi")]
        assert "".join(ch.text or "" for ch in chunks) == "slow but sure"
