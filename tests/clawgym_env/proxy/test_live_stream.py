"""True token streaming: through each dialect's official SDK, text reaches the client while the tiny model
still decodes, the streamed text is the unstreamed reply's, and the capture is the same as unstreamed."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from clawgym_env.capture.records import CallRecord
from clawgym_env.proxy import ProxyServer
from clawgym_env.proxy._live import LiveText
from clawgym_env.proxy.backends.hf import HFBackend

from .conftest import WRITE_TOOL_ANTHROPIC, WRITE_TOOL_OPENAI

MAX_TOKENS = 48


@pytest.fixture(scope="module")
def hf() -> Iterator[HFBackend]:
    """SmolLM2: the tiny model decodes 40 tokens before an SDK has parsed its first event, which proves nothing."""
    import asyncio

    from clawgym_env.models.smollm2 import default_model_path

    # no EOS: every call decodes MAX_TOKENS tokens; no prefix reuse, so the two calls compute alike, bit for bit
    b = HFBackend(default_model_path(), eos_token_ids=[], prefix_cache_mb=0)
    yield b
    asyncio.run(b.aclose())


async def anthropic_text(url: str, key: str, stream: bool, seen: Callable[[], None]) -> str:
    import anthropic

    c = anthropic.AsyncAnthropic(base_url=url, api_key=key, max_retries=0)
    kw: dict[str, Any] = {
        "model": "m",
        "max_tokens": 4096,
        "system": "agent",
        "tools": [WRITE_TOOL_ANTHROPIC],
        "messages": [{"role": "user", "content": "list the files please"}],
    }
    if not stream:
        r = await c.messages.create(**kw)
        return "".join(b.text for b in r.content if b.type == "text")
    async with c.messages.stream(**kw) as s:
        async for _ in s.text_stream:
            seen()
        final = await s.get_final_message()
    return "".join(b.text for b in final.content if b.type == "text")


async def chat_text(url: str, key: str, stream: bool, seen: Callable[[], None]) -> str:
    import openai

    c = openai.AsyncOpenAI(base_url=url + "/v1", api_key=key, max_retries=0)
    kw: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "list the files please"}], "tools": [WRITE_TOOL_OPENAI]}
    if not stream:
        return (await c.chat.completions.create(**kw)).choices[0].message.content or ""
    text = ""
    async for ch in await c.chat.completions.create(stream=True, **kw):
        if ch.choices and ch.choices[0].delta.content:
            seen()
            text += ch.choices[0].delta.content
    return text


async def responses_text(url: str, key: str, stream: bool, seen: Callable[[], None]) -> str:
    import openai

    c = openai.AsyncOpenAI(base_url=url + "/v1", api_key=key, max_retries=0)
    kw: dict[str, Any] = {"model": "m", "instructions": "agent", "input": "list the files please"}
    if not stream:
        return (await c.responses.create(**kw)).output_text
    async with c.responses.stream(**kw) as s:
        async for ev in s:
            if ev.type == "response.output_text.delta":
                seen()
        final = await s.get_final_response()
    return final.output_text


async def gemini_text(url: str, key: str, stream: bool, seen: Callable[[], None]) -> str:
    from google import genai
    from google.genai import types

    c = genai.Client(api_key=key, http_options=types.HttpOptions(base_url=url)).aio
    if not stream:
        return (await c.models.generate_content(model="m", contents="list the files please")).text or ""
    text = ""
    async for ch in await c.models.generate_content_stream(model="m", contents="list the files please"):
        if ch.text:
            seen()
            text += ch.text
    return text


CLIENTS = {"anthropic": anthropic_text, "openai-chat": chat_text, "openai-responses": responses_text, "gemini": gemini_text}


@pytest.mark.parametrize("dialect", list(CLIENTS))
async def test_text_streams_while_decoding_and_the_capture_is_unchanged(
    dialect: str, server: ProxyServer, hf: HFBackend, tmp_path: Path
) -> None:
    records: dict[bool, CallRecord] = {}
    texts: dict[bool, str] = {}
    for stream in (False, True):
        sess = server.open_session(
            hf, capture_path=tmp_path / f"{stream}.jsonl", sampling={"max_tokens": MAX_TOKENS, "seed": 11, "temperature": 1.0}
        )
        deltas: list[tuple[int, int]] = []  # (decode steps so far, calls recorded) when each text delta arrived

        def seen(sess: Any = sess) -> None:
            deltas.append((hf.stats["steps"], len(sess.calls)))

        texts[stream] = await CLIENTS[dialect](server.url, sess.api_key, stream, seen)
        (records[stream],) = await server.close_session(sess.session_id)
        if stream:
            assert len(deltas) >= 3, deltas  # text came in pieces
            assert deltas[0][1] == 0 and deltas[0][0] < hf.stats["steps"]  # the first before the call ended
    plain, live = records[False], records[True]
    assert live.stream and not plain.stream
    assert live.prompt_ids == plain.prompt_ids
    assert live.completion_ids == plain.completion_ids and len(live.completion_ids or []) == MAX_TOKENS
    assert live.logprobs == plain.logprobs and live.completion_text == plain.completion_text
    assert live.response == {**plain.response, **({"tool_calls": live.response["tool_calls"]} if "tool_calls" in plain.response else {})}
    assert texts[True] == texts[False] == plain.response["content"] and texts[True]
    assert not (live.meta or {}).get("live_text_mismatch")


@pytest.mark.parametrize(
    ("pieces", "live"),
    [
        (["Hello", " wor", "ld  ", "\n"], "Hello world"),
        (["  lead", "ing <to", "ol_call>{}</tool_call> after"], "leading"),
        (["a < b", " and <th", "ink>x</think>"], "a < b and"),
        (["x <tool", "box> y"], "x <toolbox> y"),
    ],
)
def test_live_text_is_a_prefix_of_the_final_content(pieces: list[str], live: str) -> None:
    from clawgym_env.proxy._output import parse_model_output

    t = LiveText()
    out = "".join(t.feed(p) for p in pieces)
    assert out == live
    assert parse_model_output("".join(pieces))["content"].startswith(out)
    assert LiveText(enabled=False).feed("anything") == ""
