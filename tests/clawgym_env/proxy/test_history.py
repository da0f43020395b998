"""Resent history shares the previous call's objects, and the capture stays byte-identical to an unshared one."""

from __future__ import annotations

from pathlib import Path

import anthropic
import numpy
import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from clawgym_env.capture import read_capture
from clawgym_env.capture.store import JSON_OPTIONS
from clawgym_env.proxy import ProxyServer, ScriptedBackend
from clawgym_env.proxy._history import SharedHistory, _dumps

from .conftest import WRITE_CALL, WRITE_TOOL_ANTHROPIC


async def test_resent_history_is_shared_and_the_capture_is_what_an_unshared_record_encodes(server: ProxyServer, tmp_path: Path) -> None:
    path = tmp_path / "ep.jsonl"
    sess = server.open_session(ScriptedBackend([WRITE_CALL, "done", "again"]), capture_path=path)
    c = anthropic.AsyncAnthropic(base_url=server.url, api_key=sess.api_key, max_retries=0)
    user = {"role": "user", "content": "create a.txt"}
    r1 = await c.messages.create(model="m", max_tokens=64, system="be brief", messages=[user], tools=[WRITE_TOOL_ANTHROPIC])
    (block,) = r1.content
    history = [
        user,
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in r1.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": block.id, "content": "written"}]},
    ]
    await c.messages.create(model="m", max_tokens=64, system="be brief", messages=history, tools=[WRITE_TOOL_ANTHROPIC])
    # the harness resends the tool call changed only by a float (1.0 == 1 in Python, not in JSON)
    history[1]["content"][0]["input"] = {**block.input, "mode": 1.0}
    await c.messages.create(model="m", max_tokens=64, system="be brief", messages=history, tools=[WRITE_TOOL_ANTHROPIC])
    calls = await server.close_session(sess.session_id)
    a, b, d = (r.messages for r in calls)
    assert b[0] is a[0] and b[1] is a[1]  # system and first user turn: the same objects
    assert calls[1].tools is calls[0].tools
    assert d[1] is b[1] and d[2] is not b[2]  # the changed tool call is the harness's own new value
    assert d[2]["tool_calls"][0]["function"]["arguments"]["mode"] == 1.0
    lines = path.read_bytes().splitlines()
    back = read_capture(path)
    assert [orjson.dumps(r.__dict__, option=JSON_OPTIONS) for r in back] == [orjson.dumps(r.__dict__, option=JSON_OPTIONS) for r in calls]
    # format 2: a line holds what the previous one does not (the resent turns and tools are references)
    assert orjson.loads(lines[1])["delta"] == {"messages": [0, 2], "tools": 0}
    assert orjson.loads(lines[2])["delta"] == {"messages": [1, 2], "tools": 1}
    assert b'"mode":1.0' in lines[2] and b"create a.txt" not in lines[2]


def test_share_compares_bytes_not_values() -> None:
    h = SharedHistory()
    first = [{"role": "system", "content": "s"}, {"role": "user", "content": "x", "n": 1}]
    h.share(first, [])
    again, _, mj, tj, size = h.share([{"role": "system", "content": "s"}, {"role": "user", "content": "x", "n": True}], [])
    assert again[0] is first[0] and again[1] is not first[1] and again[1]["n"] is True
    assert orjson.dumps(mj) == orjson.dumps(again) and orjson.dumps(tj) == b"[]"
    assert size == len(orjson.dumps(again)) + len(b"[]")


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False) | st.text(),
        lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
        max_leaves=30,
    )
)
def test_history_json_is_the_capture_encoding(value: object) -> None:
    """SharedHistory takes orjson's faster default path; for JSON values it must give JSON_OPTIONS' bytes."""
    assert _dumps(value) == orjson.dumps(value, option=JSON_OPTIONS)


def test_history_json_falls_back_for_what_only_the_capture_encoding_takes() -> None:
    value = {"logprobs": numpy.array([-0.5, -1.25]), 3: numpy.float32(0.5)}
    assert _dumps(value) == orjson.dumps(value, option=JSON_OPTIONS) == b'{"logprobs":[-0.5,-1.25],"3":0.5}'


def test_a_text_message_is_shared_only_with_the_same_key_order() -> None:
    """A message of str values is compared without encoding it; equal dicts in another key order encode differently."""
    h = SharedHistory()
    first = [{"role": "system", "content": "s" * 5000}, {"role": "user", "content": "x"}]
    h.share(first, [])
    again, _, mj, _, size = h.share([{"role": "system", "content": "s" * 5000}, {"content": "x", "role": "user"}], [])
    assert again[0] is first[0] and again[1] is not first[1]
    assert orjson.dumps(mj) == orjson.dumps(again) and b'{"content":"x","role":"user"}' in orjson.dumps(mj)
    assert size == len(orjson.dumps(again)) + len(b"[]")


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-2, 2) | st.sampled_from(["a", "b"]),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2),
    max_leaves=6,
)
_MESSAGE = st.dictionaries(st.sampled_from(["role", "content", "name"]), _JSON | st.sampled_from(["a", "b"]), min_size=1, max_size=3)


@settings(max_examples=400, deadline=None)
@given(st.lists(_MESSAGE, max_size=4), st.lists(_MESSAGE, max_size=4))
def test_shared_history_encodes_as_the_new_messages_whatever_was_shared(first: list, second: list) -> None:
    """Whatever the previous call held (equal values of other types, other key orders), the shared list encodes to
    the new messages' bytes, and an earlier object stands in only where it encodes to the same bytes."""
    h = SharedHistory()
    h.share(first, [])
    again, _, mj, _, size = h.share(second, [])
    assert orjson.dumps(mj) == orjson.dumps(second) == orjson.dumps(again)
    assert size == len(orjson.dumps(second)) + len(b"[]")
    for i, m in enumerate(again):
        assert m is second[i] or (m is first[i] and orjson.dumps(m) == orjson.dumps(second[i]))
