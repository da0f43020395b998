"""Gemini API (generateContent / streamGenerateContent / countTokens) through the official google-genai SDK."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from google import genai
from google.genai import errors, types

from clawgym_env.proxy import ProxyServer, ScriptedBackend
from clawgym_env.proxy.dialects import gemini

from .conftest import WRITE_CALL

WRITE_DECL = types.FunctionDeclaration(
    name="Write",
    description="Write a file.",
    parameters=types.Schema(
        type="OBJECT",
        properties={"file_path": types.Schema(type="STRING"), "content": types.Schema(type="STRING")},
        required=["file_path", "content"],
    ),
)
NO_AFC = types.AutomaticFunctionCallingConfig(disable=True)


def client(server: ProxyServer, key: str) -> genai.Client:
    return genai.Client(api_key=key, http_options=types.HttpOptions(base_url=server.url))


def config(**kw: object) -> types.GenerateContentConfig:
    return types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[WRITE_DECL])], system_instruction="sys", automatic_function_calling=NO_AFC, **kw
    )


async def test_function_call_round_trip(server: ProxyServer) -> None:
    sess = server.open_session(ScriptedBackend([WRITE_CALL, {"text": "done", "reasoning": "checked"}]))
    c = client(server, sess.api_key).aio
    r1 = await c.models.generate_content(model="gemini-x", contents="make a.txt", config=config(temperature=0.3))
    (fc,) = r1.function_calls
    assert fc.name == "Write" and fc.args == {"file_path": "a.txt", "content": "hello"} and fc.id.startswith("call_")
    assert r1.candidates[0].finish_reason == types.FinishReason.STOP
    history = [
        types.Content(role="user", parts=[types.Part(text="make a.txt")]),
        r1.candidates[0].content,
        types.Content(
            role="user", parts=[types.Part(function_response=types.FunctionResponse(id=fc.id, name="Write", response={"output": "ok"}))]
        ),
    ]
    r2 = await c.models.generate_content(model="gemini-x", contents=history, config=config())
    assert r2.text == "done" and r2.usage_metadata.prompt_token_count > 0
    assert [p.thought for p in r2.candidates[0].content.parts] == [True, None]
    first, second = sess.calls
    assert first.path == "/v1/models/gemini-x:generateContent" and first.dialect == "gemini" and not first.stream
    assert second.messages == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "make a.txt"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": fc.id, "type": "function", "function": {"name": "Write", "arguments": {"file_path": "a.txt", "content": "hello"}}}
            ],
        },
        {"role": "tool", "tool_call_id": fc.id, "content": "ok"},
    ]
    assert second.messages[2] == first.response | {"content": ""}
    (tool,) = second.tools
    assert tool["function"]["parameters"]["type"] == "object"  # OpenAPI OBJECT -> JSON Schema object
    assert tool["function"]["parameters"]["properties"]["content"] == {"type": "string"}


async def test_streaming_text_and_call(server: ProxyServer) -> None:
    sess = server.open_session(ScriptedBackend([{"text": "Let me write.", **WRITE_CALL}]))
    c = client(server, sess.api_key).aio
    chunks = [
        ch
        async for ch in await c.models.generate_content_stream(
            model="gemini-x", contents="go", config=config(max_output_tokens=64, stop_sequences=["END"])
        )
    ]
    assert "".join(ch.text or "" for ch in chunks if ch.candidates[0].content.parts[0].text) == "Let me write."
    calls = [fc for ch in chunks for fc in ch.function_calls or ()]
    assert [fc.name for fc in calls] == ["Write"] and calls[0].args["content"] == "hello"
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP
    (rec,) = sess.calls
    assert rec.stream and rec.path.endswith(":streamGenerateContent")


async def test_function_response_without_id_pairs_with_the_open_call(server: ProxyServer) -> None:
    """A history whose function call/response carry no id (not issued by us): paired by name, in order."""
    sess = server.open_session(ScriptedBackend(["done"]))
    c = client(server, sess.api_key).aio
    history = [
        types.Content(role="user", parts=[types.Part(text="go")]),
        types.Content(
            role="model",
            parts=[
                types.Part(function_call=types.FunctionCall(name="Write", args={"a": 1})),
                types.Part(function_call=types.FunctionCall(name="Read", args={})),
            ],
        ),
        types.Content(
            role="user",
            parts=[
                types.Part(function_response=types.FunctionResponse(name="Read", response={"output": "r"})),
                types.Part(function_response=types.FunctionResponse(name="Write", response={"error": "denied", "code": 3})),
            ],
        ),
    ]
    await c.models.generate_content(model="m", contents=history, config=config())
    msgs = sess.calls[0].messages
    ids = {c["function"]["name"]: c["id"] for c in msgs[2]["tool_calls"]}
    assert msgs[3] == {"role": "tool", "tool_call_id": ids["Read"], "content": "r"}
    assert msgs[4] == {"role": "tool", "tool_call_id": ids["Write"], "content": '{"code":3,"error":"denied"}'}


async def test_count_tokens_is_answered_without_a_model_call(server: ProxyServer) -> None:
    sess = server.open_session(ScriptedBackend(["never"]))
    r = await client(server, sess.api_key).aio.models.count_tokens(model="m", contents="hello there")
    assert r.total_tokens > 0 and sess.calls == []


async def test_bad_key_and_bad_body_answer_in_the_gemini_error_shape(server: ProxyServer) -> None:
    sess = server.open_session(ScriptedBackend(["x"]))
    with pytest.raises(errors.ClientError) as bad_key:
        await client(server, "wrong").aio.models.generate_content(model="m", contents="hi")
    assert bad_key.value.code == 401 and bad_key.value.status == "UNAUTHENTICATED"
    import httpx

    async with httpx.AsyncClient() as h:
        r = await h.post(f"{server.url}/v1beta/models/m:generateContent?key={sess.api_key}", json={"contents": 3})
    assert r.status_code == 400 and r.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert "contents" in r.json()["error"]["message"]


def test_route_parses_model_and_method() -> None:
    assert gemini.route("/v1beta/models/gemini-2.5-pro:streamGenerateContent") == ("gemini-2.5-pro", "streamGenerateContent")
    assert gemini.route("/v1/models/m:countTokens") == ("m", "countTokens")
    assert gemini.route("/v1/models") is None and gemini.route("/v1beta/models/m:embedContent") is None
