"""OpenAI Chat Completions and Responses through the official SDK, streaming and not, with tool calls."""

from __future__ import annotations

import json

import openai

from clawgym_env.proxy import ProxyServer, ScriptedBackend

from .conftest import WRITE_CALL, WRITE_TOOL_OPENAI


def client(server: ProxyServer, key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0)


async def test_chat_tool_call_round_trip(server: ProxyServer) -> None:
    sess = server.open_session(ScriptedBackend([WRITE_CALL, "done"]))
    c = client(server, sess.api_key)
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "make a.txt"}]
    r1 = await c.chat.completions.create(model="gpt-x", messages=msgs, tools=[WRITE_TOOL_OPENAI])
    choice = r1.choices[0]
    assert choice.finish_reason == "tool_calls"
    (tc,) = choice.message.tool_calls
    assert tc.id.startswith("call_") and tc.function.name == "Write"
    assert json.loads(tc.function.arguments) == {"file_path": "a.txt", "content": "hello"}
    msgs += [choice.message.model_dump(exclude_none=True), {"role": "tool", "tool_call_id": tc.id, "content": "ok"}]
    r2 = await c.chat.completions.create(model="gpt-x", messages=msgs, tools=[WRITE_TOOL_OPENAI])
    assert r2.choices[0].message.content == "done" and r2.choices[0].finish_reason == "stop"
    assert r2.usage.prompt_tokens > 0
    rec = sess.calls[1]
    assert rec.messages[2]["tool_calls"][0]["id"] == tc.id
    assert rec.messages[3] == {"role": "tool", "tool_call_id": tc.id, "content": "ok"}


async def test_chat_streaming_tool_calls_and_usage(server: ProxyServer) -> None:
    sess = server.open_session(ScriptedBackend([{"text": "Let me write.", "reasoning": "plan", **WRITE_CALL}]))
    c = client(server, sess.api_key)
    async with c.chat.completions.stream(
        model="m", messages=[{"role": "user", "content": "go"}], tools=[WRITE_TOOL_OPENAI], stream_options={"include_usage": True}
    ) as s:
        async for _ in s:
            pass
        final = await s.get_final_completion()
    msg = final.choices[0].message
    assert final.choices[0].finish_reason == "tool_calls" and msg.content == "Let me write."
    assert msg.tool_calls[0].function.name == "Write"
    assert json.loads(msg.tool_calls[0].function.arguments)["file_path"] == "a.txt"
    assert final.usage is not None and final.usage.completion_tokens > 0


async def test_chat_stream_without_usage_has_no_usage_chunk(server: ProxyServer) -> None:
    sess = server.open_session(ScriptedBackend(["hi there"]))
    c = client(server, sess.api_key)
    chunks = [ch async for ch in await c.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], stream=True)]
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == "hi there"
    assert all(ch.usage is None for ch in chunks) and chunks[-1].choices[0].finish_reason == "stop"


async def test_openclaw_style_rewritten_tool_ids_map_back(server: ProxyServer) -> None:
    """OpenClaw drops the underscore from tool-call ids; the session maps them back to the ids it issued."""
    sess = server.open_session(ScriptedBackend([WRITE_CALL, "done"]))
    c = client(server, sess.api_key)
    r1 = await c.chat.completions.create(model="m", messages=[{"role": "user", "content": "go"}], tools=[WRITE_TOOL_OPENAI])
    issued = r1.choices[0].message.tool_calls[0].id
    rewritten = issued.replace("_", "")
    assistant = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": rewritten, "type": "function", "function": {"name": "Write", "arguments": '{"content":"hello","file_path":"a.txt"}'}}
        ],
    }
    await c.chat.completions.create(
        model="m",
        tools=[WRITE_TOOL_OPENAI],
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "go"}]},
            assistant,
            {"role": "tool", "tool_call_id": rewritten, "content": [{"type": "text", "text": "ok"}]},
        ],
    )
    first, second = sess.calls
    assert second.messages[1] == first.response | {"content": ""}
    assert second.messages[2] == {"role": "tool", "tool_call_id": issued, "content": "ok"}


async def test_responses_function_call_round_trip(server: ProxyServer) -> None:
    sess = server.open_session(ScriptedBackend([WRITE_CALL, {"text": "done", "reasoning": "checked"}]))
    c = client(server, sess.api_key)
    tools = [
        {"type": "function", "name": "Write", "description": "Write a file.", "parameters": WRITE_TOOL_OPENAI["function"]["parameters"]}
    ]
    r1 = await c.responses.create(model="m", instructions="sys", input="make a.txt", tools=tools)
    (fc,) = [o for o in r1.output if o.type == "function_call"]
    assert fc.name == "Write" and json.loads(fc.arguments) == {"file_path": "a.txt", "content": "hello"}
    items = [
        {"role": "user", "content": "make a.txt"},
        {"type": "function_call", "call_id": fc.call_id, "name": fc.name, "arguments": fc.arguments},
        {"type": "function_call_output", "call_id": fc.call_id, "output": "ok"},
    ]
    r2 = await c.responses.create(model="m", instructions="sys", input=items, tools=tools)
    assert r2.output_text == "done" and r2.usage.output_tokens >= 0
    assert [o.type for o in r2.output] == ["reasoning", "message"]
    rec = sess.calls[1]
    assert rec.messages == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "make a.txt"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": fc.call_id,
                    "type": "function",
                    "function": {"name": "Write", "arguments": {"file_path": "a.txt", "content": "hello"}},
                }
            ],
        },
        {"role": "tool", "tool_call_id": fc.call_id, "content": "ok"},
    ]


async def test_responses_streaming_events_parse(server: ProxyServer) -> None:
    sess = server.open_session(ScriptedBackend([{"text": "writing", **WRITE_CALL}]))
    c = client(server, sess.api_key)
    tools = [{"type": "function", "name": "Write", "parameters": WRITE_TOOL_OPENAI["function"]["parameters"]}]
    kinds: list[str] = []
    async with c.responses.stream(model="m", input=[{"role": "user", "content": "go"}], tools=tools) as s:
        async for ev in s:
            kinds.append(ev.type)
        final = await s.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.function_call_arguments.done" in kinds and "response.output_text.delta" in kinds
    assert final.output_text == "writing"
    fc = [o for o in final.output if o.type == "function_call"][0]
    assert json.loads(fc.arguments)["content"] == "hello" and fc.call_id.startswith("call_")


async def test_models_endpoint_openai_client(server: ProxyServer) -> None:
    sess = server.open_session(ScriptedBackend([]), model_name="policy-7")
    ids = [m.id async for m in client(server, sess.api_key).models.list()]
    assert ids == ["policy-7"]
