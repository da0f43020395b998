"""Any JSON object a client sends is either understood or refused as a bad request: never a crash."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clawgym_env.proxy._neutral import ToolIdMap
from clawgym_env.proxy.dialects import DIALECTS
from clawgym_env.proxy.dialects._common import BadRequest

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "role",
                    "content",
                    "type",
                    "text",
                    "id",
                    "name",
                    "input",
                    "tool_use_id",
                    "tool_calls",
                    "function",
                    "arguments",
                    "call_id",
                    "output",
                    "summary",
                    "system",
                    "x",
                ]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=20,
)
roles = st.sampled_from(["user", "assistant", "system", "tool", "developer", "bogus"])
message = st.fixed_dictionaries({"role": roles}, optional={"content": json_values, "tool_calls": json_values, "tool_call_id": json_values})
item = st.one_of(
    message,
    st.fixed_dictionaries(
        {"type": st.sampled_from(["message", "function_call", "function_call_output", "reasoning", "other"])},
        optional={
            "role": roles,
            "content": json_values,
            "call_id": json_values,
            "name": json_values,
            "arguments": json_values,
            "output": json_values,
            "summary": json_values,
        },
    ),
)
body = st.fixed_dictionaries(
    {},
    optional={
        "messages": st.lists(message, max_size=4) | json_values,
        "input": st.lists(item, max_size=4) | json_values,
        "system": json_values,
        "instructions": json_values,
        "tools": json_values,
        "max_tokens": json_values,
        "max_output_tokens": json_values,
        "stop": json_values,
        "stop_sequences": json_values,
        "stream_options": json_values,
        "stream": json_values,
        "temperature": json_values,
    },
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=body, name=st.sampled_from(sorted(DIALECTS)))
def test_parse_request_accepts_or_raises_bad_request(body: dict, name: str) -> None:
    try:
        parsed = DIALECTS[name].parse_request(body, ToolIdMap())
    except BadRequest:
        return
    for m in parsed.messages:
        assert m["role"] in ("system", "user", "assistant", "tool") and isinstance(m["content"], str)
