"""Property: rendering a longer history only appends text (what the proxy's TITO splicing relies on)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import AutoTokenizer

from clawgym_env.models.testing import tiny_model_path

TOKENIZER = AutoTokenizer.from_pretrained(tiny_model_path())
TOOLS = [{"type": "function", "function": {"name": "bash", "description": "Run", "parameters": {"type": "object"}}}]

text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
call = st.fixed_dictionaries(
    {
        "id": st.text(max_size=6),
        "type": st.just("function"),
        "function": st.fixed_dictionaries(
            {
                "name": st.sampled_from(["bash", "read"]),
                "arguments": st.one_of(st.dictionaries(st.sampled_from(["a", "b"]), text, max_size=2), st.just('{"x": 1}')),
            }
        ),
    }
)
user = st.builds(lambda c, parts: {"role": "user", "content": [{"type": "text", "text": c}] if parts else c}, text, st.booleans())
assistant = st.builds(
    lambda c, r, calls: {
        "role": "assistant",
        "content": c,
        **({"reasoning_content": r} if r else {}),
        **({"tool_calls": calls} if calls else {}),
    },
    text,
    text,
    st.lists(call, max_size=2),
)
tool = st.builds(lambda c: {"role": "tool", "tool_call_id": "x", "content": c}, text)
message = st.one_of(user, assistant, tool)


def render(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
    return TOKENIZER.apply_chat_template(messages, tools=tools, tokenize=False)


@settings(max_examples=150, deadline=None)
@given(system=st.one_of(st.none(), text), messages=st.lists(message, min_size=1, max_size=6), with_tools=st.booleans())
def test_longer_history_only_appends(system: str | None, messages: list[dict[str, Any]], with_tools: bool) -> None:
    history = ([{"role": "system", "content": system}] if system is not None else []) + messages
    tools = TOOLS if with_tools else None
    full = render(history, tools)
    for k in range(1, len(history)):
        if history[k - 1]["role"] == "tool" and history[k]["role"] == "tool":
            continue  # a group of tool results closes its user turn only after the last one
        assert full.startswith(render(history[:k], tools)), k
    assert render(history, tools) == full  # deterministic
    gen = TOKENIZER.apply_chat_template(history, tools=tools, tokenize=False, add_generation_prompt=True)
    assert gen == full + "<|im_start|>assistant\n"
