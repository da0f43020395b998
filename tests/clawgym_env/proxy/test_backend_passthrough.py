"""API passthrough backends against fake OpenAI / Anthropic APIs (local starlette servers, named as such)."""

from __future__ import annotations

import itertools
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from clawgym_env.errors import PolicyBackendError
from clawgym_env.proxy.backends.base import CompletionRequest
from clawgym_env.proxy.backends.passthrough import AnthropicPassthrough, OpenAIPassthrough, to_anthropic_messages

KEY = "sk-test-123"
TOOLS = [{"type": "function", "function": {"name": "bash", "description": "Run", "parameters": {"type": "object"}}}]
HISTORY = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "list files"}]},
    {
        "role": "assistant",
        "content": "",
        "reasoning_content": "hmm",
        "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "bash", "arguments": {"command": "ls"}}},
            {"function": {"name": "bash", "arguments": '{"command": "pwd"}'}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_a", "content": "a.txt"},
    {"role": "tool", "content": "/work"},
    {"role": "user", "content": "thanks, now count them"},
]


class FakeAPIs:
    """Fake OpenAI Chat Completions and Anthropic Messages endpoints that record what they got."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, Any], dict[str, str]]] = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/chat/completions", self.openai, methods=["POST"]),
                Route("/v1/messages", self.anthropic, methods=["POST"]),
            ]
        )

    async def openai(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.received.append(("openai", body, dict(request.headers)))
        if request.headers.get("authorization") != f"Bearer {KEY}":
            return JSONResponse({"error": {"message": "Incorrect API key", "type": "invalid_request_error"}}, status_code=401)
        last = body["messages"][-1]
        if body.get("tools") and last["role"] == "user" and "count" not in str(last["content"]):
            msg = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls -la"}'}}],
            }
            finish = "tool_calls"
        else:
            msg = {"role": "assistant", "content": "There are 2 files."}
            finish = "length" if body.get("max_tokens", 99) < 5 else "stop"
        return JSONResponse(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "message": msg, "finish_reason": finish, "logprobs": None}],
                "usage": {"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57},
            }
        )

    async def anthropic(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.received.append(("anthropic", body, dict(request.headers)))
        if request.headers.get("x-api-key") != KEY or not request.headers.get("anthropic-version"):
            return JSONResponse(
                {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}, status_code=401
            )
        roles = [m["role"] for m in body["messages"]]
        if roles[0] != "user" or any(a == b for a, b in itertools.pairwise(roles)):
            return JSONResponse(
                {"type": "error", "error": {"type": "invalid_request_error", "message": "roles must alternate"}}, status_code=400
            )
        if body.get("tools") and len(body["messages"]) == 1:
            content = [
                {"type": "thinking", "thinking": "use bash", "signature": "sig"},
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_9", "name": "bash", "input": {"command": "ls"}},
            ]
            stop = "tool_use"
        else:
            content = [{"type": "text", "text": "Two files."}]
            stop = "max_tokens" if body["max_tokens"] < 5 else "end_turn"
        return JSONResponse(
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": content,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {"input_tokens": 40, "output_tokens": 9},
            }
        )


@pytest.fixture(scope="module")
def fake_api() -> Iterator[tuple[FakeAPIs, str]]:
    fake = FakeAPIs()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(fake.app(), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    yield fake, f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


def req(messages: list[dict[str, Any]], **kw: Any) -> CompletionRequest:
    return CompletionRequest(session_id="s", call_index=0, prompt_ids=None, messages=messages, **kw)


async def test_openai_passthrough_tool_call_round_trip(fake_api: tuple[FakeAPIs, str]) -> None:
    fake, url = fake_api
    b = OpenAIPassthrough(url + "/v1", "gpt-test", KEY)
    assert b.TOKEN_LEVEL is False and b.tokenizer is None
    out = await b.handle(req([{"role": "user", "content": "list files"}], tools=TOOLS, seed=3))
    assert out.completion_ids is None and out.logprobs is None and out.token_source == "none"
    assert out.structured == {"content": "", "reasoning_content": "", "tool_calls": [{"name": "bash", "arguments": {"command": "ls -la"}}]}
    assert out.usage == {"prompt_tokens": 50, "completion_tokens": 7}
    _, body, _ = fake.received[-1]
    assert body["tools"] == TOOLS and body["seed"] == 3 and body["stream"] is False

    out = await b.handle(req(HISTORY, tools=TOOLS))
    assert out.text == "There are 2 files." and out.finish_reason == "stop"
    _, body, _ = fake.received[-1]
    sent_calls = body["messages"][2]["tool_calls"]
    assert [c["function"]["arguments"] for c in sent_calls] == ['{"command": "ls"}', '{"command": "pwd"}']
    assert all(c["type"] == "function" and c["id"] for c in sent_calls)
    assert "reasoning_content" not in body["messages"][2]
    out = await b.handle(req(HISTORY, max_tokens=2))
    assert out.finish_reason == "length"
    await b.aclose()


async def test_anthropic_passthrough_converts_and_parses(fake_api: tuple[FakeAPIs, str]) -> None:
    fake, url = fake_api
    b = AnthropicPassthrough(url, "claude-test", KEY)
    out = await b.handle(req([{"role": "user", "content": "list files"}], tools=TOOLS, stop=["END"]))
    assert out.structured == {
        "content": "Let me look.",
        "reasoning_content": "use bash",
        "tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}],
    }
    assert out.token_source == "none" and out.usage == {"prompt_tokens": 40, "completion_tokens": 9}
    _, body, headers = fake.received[-1]
    assert body["tools"] == [{"name": "bash", "description": "Run", "input_schema": {"type": "object"}}]
    assert body["stop_sequences"] == ["END"] and "top_p" not in body and headers["anthropic-version"] == "2023-06-01"

    out = await b.handle(req(HISTORY, tools=TOOLS, max_tokens=3))
    assert out.text == "Two files." and out.finish_reason == "length"
    _, body, _ = fake.received[-1]
    assert body["system"] == "Be brief."
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    uses = [blk for blk in body["messages"][1]["content"] if blk["type"] == "tool_use"]
    results = [blk for blk in body["messages"][2]["content"] if blk["type"] == "tool_result"]
    assert [u["input"] for u in uses] == [{"command": "ls"}, {"command": "pwd"}]
    assert [r["tool_use_id"] for r in results] == [u["id"] for u in uses]  # unnamed result matched in order
    assert body["messages"][2]["content"][-1] == {"type": "text", "text": "thanks, now count them"}
    await b.aclose()


def test_anthropic_message_conversion_alternates_roles() -> None:
    system, msgs = to_anthropic_messages(
        [
            {"role": "user", "content": "a"},
            {"role": "user", "content": "b"},
            {"role": "assistant", "content": ""},
            {"role": "system", "content": "late"},
        ]
    )
    assert system == "late"
    assert [m["role"] for m in msgs] == ["user", "assistant"]
    assert [blk["text"] for blk in msgs[0]["content"]] == ["a", "b"]


async def test_api_errors_name_the_status(fake_api: tuple[FakeAPIs, str]) -> None:
    _, url = fake_api
    for backend in (OpenAIPassthrough(url, "m", "wrong-key"), AnthropicPassthrough(url, "m", "wrong-key")):
        with pytest.raises(PolicyBackendError, match="HTTP 401"):
            await backend.handle(req([{"role": "user", "content": "hi"}]))
        await backend.aclose()
    missing = OpenAIPassthrough(url + "/nothing-here", "m", KEY)
    with pytest.raises(PolicyBackendError, match="HTTP 404"):
        await missing.handle(req([{"role": "user", "content": "hi"}]))
    await missing.aclose()
