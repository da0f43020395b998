"""Model text -> reasoning, content and tool calls; malformed calls stay text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from clawgym_env.proxy import parse_model_output


def test_plain_text() -> None:
    assert parse_model_output("  hello  ") == {"content": "hello", "reasoning_content": "", "tool_calls": []}


def test_think_and_tool_calls() -> None:
    text = (
        '<think>\nplan it\n</think>\n\nI will write.\n<tool_call>\n{"name": "Write", "arguments": '
        '{"file_path": "a.txt"}}\n</tool_call>\n<tool_call>{"name": "Bash", "arguments": "{\\"cmd\\": \\"ls\\"}"}</tool_call>'
    )
    out = parse_model_output(text)
    assert out["reasoning_content"] == "plan it" and out["content"] == "I will write."
    assert out["tool_calls"] == [{"name": "Write", "arguments": {"file_path": "a.txt"}}, {"name": "Bash", "arguments": {"cmd": "ls"}}]


def test_reasoning_opened_by_the_generation_prompt() -> None:
    assert parse_model_output("deep thought</think>answer")["reasoning_content"] == "deep thought"


def test_malformed_tool_call_comes_back_as_text() -> None:
    bad = '<tool_call>\n{"name": "Write", "arguments": {"file_path": "a.txt"\n</tool_call>'
    out = parse_model_output("ok " + bad)
    assert out["tool_calls"] == [] and out["content"] == "ok " + bad
    unterminated = '<tool_call>{"name": "Write", "arguments": {}}'
    assert parse_model_output(unterminated)["tool_calls"] == [{"name": "Write", "arguments": {}}]
    for junk in [
        "<tool_call>[1, 2]</tool_call>",
        '<tool_call>{"arguments": {}}</tool_call>',
        '<tool_call>{"name": "x", "arguments": [1]}</tool_call>',
    ]:
        assert parse_model_output(junk) == {"content": junk, "reasoning_content": "", "tool_calls": []}


@given(st.text())
def test_never_raises_on_any_text(text: str) -> None:
    out = parse_model_output(text)
    assert isinstance(out["content"], str) and isinstance(out["tool_calls"], list)
