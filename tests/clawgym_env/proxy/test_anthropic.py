"""Anthropic Messages through the official SDK: tool-use round trips, streaming, Claude Code's shapes."""

from __future__ import annotations

import anthropic
import httpx

from clawgym_env.proxy import ProxyServer, ScriptedBackend

from .conftest import WRITE_CALL, WRITE_TOOL_ANTHROPIC


def client(server: ProxyServer, key: str) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=server.url, api_key=key, max_retries=0)


async def test_tool_use_round_trip_non_streaming(server: ProxyServer) -> None:
    sess = server.open_session(ScriptedBackend([WRITE_CALL, "all done"]))
    c = client(server, sess.api_key)
    user = {"role": "user", "content": "create a.txt"}
    r1 = await c.messages.create(model="claude-x", max_tokens=256, system="be brief", messages=[user], tools=[WRITE_TOOL_ANTHROPIC])
    assert r1.stop_reason == "tool_use" and r1.model == "claude-x"
    (block,) = r1.content
    assert block.type == "tool_use" and block.name == "Write" and block.id.startswith("toolu_")
    assert block.input == {"file_path": "a.txt", "content": "hello"}
    history = [
        user,
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in r1.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": block.id, "content": "written"}]},
    ]
    r2 = await c.messages.create(model="claude-x", max_tokens=256, system="be brief", messages=history, tools=[WRITE_TOOL_ANTHROPIC])
    assert r2.stop_reason == "end_turn" and r2.content[0].text == "all done"
    calls = await server.close_session(sess.session_id)
    assert [c.call_index for c in calls] == [0, 1] and all(c.status == 200 for c in calls)
    msgs = calls[1].messages
    assert msgs[0] == {"role": "system", "content": "be brief"}
    assert msgs[2]["tool_calls"][0]["id"] == block.id
    assert msgs[2]["tool_calls"][0]["function"] == {"name": "Write", "arguments": {"file_path": "a.txt", "content": "hello"}}
    assert msgs[3] == {"role": "tool", "tool_call_id": block.id, "content": "written"}
    assert calls[0].tools == [
        {
            "type": "function",
            "function": {"name": "Write", "description": "Write a file.", "parameters": WRITE_TOOL_ANTHROPIC["input_schema"]},
        }
    ]
    assert calls[0].finish_reason == "tool_calls" and calls[0].token_source == "none"
    assert calls[0].meta["system_hash"] == calls[1].meta["system_hash"]


async def test_streaming_thinking_text_and_tool_use_parse(server: ProxyServer) -> None:
    reply = {"reasoning": "the user wants a file", "text": "Creating it.", **WRITE_CALL}
    sess = server.open_session(ScriptedBackend([reply]))
    c = client(server, sess.api_key)
    events: list[str] = []
    async with c.messages.stream(
        model="m", max_tokens=64, messages=[{"role": "user", "content": "go"}], tools=[WRITE_TOOL_ANTHROPIC]
    ) as stream:
        async for ev in stream:
            events.append(ev.type)
        final = await stream.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "text", "tool_use"]
    assert final.content[0].thinking == "the user wants a file"
    assert final.content[1].text == "Creating it."
    assert final.content[2].input == {"file_path": "a.txt", "content": "hello"}
    assert final.stop_reason == "tool_use" and final.usage.output_tokens > 0
    assert events[0] == "message_start" and events[-1] == "message_stop"
    assert "input_json" in events and "thinking" in events and "message_delta" in events
    assert sess.calls[0].stream is True


async def test_claude_code_shapes_beta_system_in_messages_cache_control(server: ProxyServer) -> None:
    """?beta=true, beta headers, role:system inside messages, block system, cache_control everywhere."""
    sess = server.open_session(ScriptedBackend(["ok", "ok"]))
    body = {
        "model": "claude-sonnet",
        "max_tokens": 32,
        "stream": True,
        "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "system", "content": "extra system"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "<system-reminder>x</system-reminder>"},
                    {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}},
                ],
            },
        ],
        "tools": [WRITE_TOOL_ANTHROPIC, {"type": "web_search_20250305", "name": "web_search"}],
        "metadata": {"user_id": "u"},
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }
    headers = {
        "x-api-key": sess.api_key,
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14,fine-grained-tool-streaming",
    }
    async with httpx.AsyncClient(base_url=server.url) as h:
        r = await h.post("/v1/messages?beta=true", json=body, headers=headers)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        assert r.text.startswith("event: message_start") and "event: message_stop" in r.text
        # the same turn sent with string content and no cache_control normalises identically
        body2 = {
            **body,
            "system": "You are Claude Code.",
            "messages": [
                {"role": "system", "content": [{"type": "text", "text": "extra system"}]},
                {"role": "user", "content": "<system-reminder>x</system-reminder>\nhi"},
            ],
            "tools": [{k: v for k, v in WRITE_TOOL_ANTHROPIC.items() if k != "cache_control"}],
        }
        r2 = await h.post("/v1/messages?beta=true", json=body2, headers=headers)
        assert r2.status_code == 200
    c0, c1 = sess.calls
    assert (
        c0.messages
        == c1.messages
        == [
            {"role": "system", "content": "You are Claude Code.\n\nextra system"},
            {"role": "user", "content": "<system-reminder>x</system-reminder>\nhi"},
        ]
    )
    assert c0.tools == c1.tools and len(c0.tools) == 1  # the server tool is not offered to the policy


async def test_beta_client_count_tokens_and_models(server: ProxyServer) -> None:
    sess = server.open_session(ScriptedBackend(["fine"]), model_name="tiny-policy")
    c = client(server, sess.api_key)
    r = await c.beta.messages.create(
        model="m", max_tokens=16, messages=[{"role": "user", "content": "hi"}], betas=["interleaved-thinking-2025-05-14"]
    )
    assert r.content[0].text == "fine"
    n = await c.messages.count_tokens(model="m", messages=[{"role": "user", "content": "hello " * 40}])
    assert n.input_tokens > 20
    models = [m.id async for m in c.models.list()]
    assert models == ["tiny-policy"]
    assert len(sess.calls) == 1  # count_tokens and models are not model calls


async def test_unix_socket_serves_the_same_sessions(server: ProxyServer) -> None:
    sess = server.open_session(ScriptedBackend(["via uds"]))
    import httpx2  # the SDK's own HTTP stack

    transport = httpx2.AsyncHTTPTransport(uds=str(server.uds_path))
    async with httpx2.AsyncClient(transport=transport, base_url="http://proxy") as h:
        c = anthropic.AsyncAnthropic(base_url="http://proxy", api_key=sess.api_key, http_client=h, max_retries=0)
        r = await c.messages.create(model="m", max_tokens=8, messages=[{"role": "user", "content": "hi"}])
    assert r.content[0].text == "via uds" and sess.calls[0].status == 200


async def test_structured_openai_style_tool_calls_translate_to_tool_use(server: ProxyServer) -> None:
    """A message-level backend (e.g. an API passthrough) may return OpenAI-shaped calls with JSON-string arguments."""
    from clawgym_env.proxy import Completion

    structured = {
        "content": "",
        "tool_calls": [
            {"id": "upstream-1", "type": "function", "function": {"name": "Write", "arguments": '{"file_path": "b.txt", "content": "x"}'}}
        ],
    }
    sess = server.open_session(ScriptedBackend(lambda r: Completion(None, None, text="", structured=structured)))
    r = await client(server, sess.api_key).messages.create(model="m", max_tokens=8, messages=[{"role": "user", "content": "go"}])
    (block,) = r.content
    assert block.type == "tool_use" and block.input == {"file_path": "b.txt", "content": "x"}
    assert block.id.startswith("toolu_") and r.stop_reason == "tool_use"
