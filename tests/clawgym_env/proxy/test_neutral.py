"""The neutral form is stable under what harnesses change between calls."""

from __future__ import annotations

from clawgym_env.proxy._neutral import HistoryKeys, ToolIdMap, history_keys, message_key
from clawgym_env.proxy.dialects import anthropic, openai_chat, openai_responses


def test_tool_id_map_undoes_rewrites() -> None:
    ids = ToolIdMap()
    issued = ids.issue("call_")
    assert ids.canonical(issued.replace("_", "")) == issued
    assert ids.canonical("foreign_id") == "foreign_id" and ids.canonical(None) == ""
    assert len({ids.issue("toolu_") for _ in range(200)}) == 200


def test_key_ignores_key_order_and_dropped_reasoning() -> None:
    a = {
        "role": "assistant",
        "content": "hi ",
        "reasoning_content": "r",
        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": {"x": 1, "y": 2}}}],
    }
    b = {
        "tool_calls": [{"function": {"arguments": {"y": 2, "x": 1}, "name": "f"}, "type": "function", "id": "c"}],
        "content": "hi",
        "role": "assistant",
    }
    assert message_key(a) == message_key(b)
    assert message_key({"role": "user", "content": "x"}) != message_key({"role": "user", "content": "y"})
    k1 = history_keys([{"role": "user", "content": "x"}], [])[0]
    k2 = history_keys([{"role": "user", "content": "x"}], [{"type": "function", "function": {"name": "f"}}])[0]
    assert k1[0] != k2[0] and k1[1] != k2[1] and len(k1) == 2


def test_history_keys_reuse_the_previous_list_only_while_it_agrees() -> None:
    """One pass gives both chains; a resent history reuses the last list's keys up to its first change only."""
    u = [{"role": "system", "content": "s"}, {"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    keys = HistoryKeys()
    p1, e1 = keys(u, [])
    assert (p1, e1) == history_keys(u, []) and p1 != e1 and len(p1) == len(e1) == 4
    changed = [u[0], {"role": "user", "content": "A"}, u[2]]  # same third message after a changed second one
    p2, e2 = keys(changed, [])
    assert (p2, e2) == history_keys(changed, [])
    assert p2[:2] == p1[:2] and p2[2] != p1[2] and p2[3] != p1[3] and e2[3] != e1[3]
    p3, _ = keys([*u[:2], {"role": "user", "content": "b", "n": 1}], [])
    p4, _ = keys([*u[:2], {"role": "user", "content": "b", "n": True}], [])  # equal in Python, not in JSON
    assert p3[3] != p4[3]
    assert keys(u, [{"type": "function", "function": {"name": "f"}}])[0][1] != p1[1]  # tools seed the chains


def test_three_dialects_agree_on_one_conversation() -> None:
    """The same tool-use exchange in each wire format translates to one neutral list."""
    expected = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "Write", "arguments": {"p": "a"}}}],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
    ]
    ant = anthropic.parse_request(
        {
            "system": "sys",
            "messages": [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "call_1", "name": "Write", "input": {"p": "a"}}]},
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": [{"type": "text", "text": "ok"}]}],
                },
            ],
        },
        ToolIdMap(),
    )
    chat = openai_chat.parse_request(
        {
            "messages": [
                {"role": "developer", "content": "sys"},
                {"role": "user", "content": [{"type": "text", "text": "go"}]},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "Write", "arguments": '{"p": "a"}'}}],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
            ]
        },
        ToolIdMap(),
    )
    resp = openai_responses.parse_request(
        {
            "instructions": "sys",
            "input": [
                {"role": "user", "content": [{"type": "input_text", "text": "go"}]},
                {"type": "function_call", "call_id": "call_1", "name": "Write", "arguments": '{"p": "a"}'},
                {"type": "function_call_output", "call_id": "call_1", "output": "ok"},
            ],
        },
        ToolIdMap(),
    )
    assert ant.messages == chat.messages == resp.messages == expected


def test_anthropic_user_turn_with_results_and_text_and_thinking() -> None:
    p = anthropic.parse_request(
        {
            "messages": [
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "s"}, {"type": "text", "text": "a"}]},
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "t1", "content": "r1", "is_error": True},
                        {
                            "type": "tool_result",
                            "tool_use_id": "t2",
                            "content": [{"type": "text", "text": "r2"}, {"type": "image", "source": {}}],
                        },
                        {"type": "text", "text": "<system-reminder>keep going</system-reminder>"},
                    ],
                },
            ]
        },
        ToolIdMap(),
    )
    assert p.messages == [
        {"role": "assistant", "content": "a", "reasoning_content": "hm"},
        {"role": "tool", "tool_call_id": "t1", "content": "r1"},
        {"role": "tool", "tool_call_id": "t2", "content": "r2\n[image]"},
        {"role": "user", "content": "<system-reminder>keep going</system-reminder>"},
    ]


def test_responses_reasoning_joins_the_next_assistant_turn() -> None:
    p = openai_responses.parse_request(
        {
            "input": [
                {"role": "user", "content": "q"},
                {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "think"}]},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]},
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "not json"},
            ]
        },
        ToolIdMap(),
    )
    assert p.messages[1] == {
        "role": "assistant",
        "content": "a",
        "reasoning_content": "think",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "not json"}}],
    }
