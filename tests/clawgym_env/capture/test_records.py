"""CallRecord.trusted() is model_construct() at a third of the cost: the same instance, field for field."""

from __future__ import annotations

import orjson
import pytest

from clawgym_env.capture.records import CallRecord


@pytest.mark.parametrize(
    "values",
    [
        {"session_id": "s", "call_index": 0, "dialect": "anthropic"},
        {
            "session_id": "s",
            "call_index": 3,
            "dialect": "openai-chat",
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
            "prompt_ids": [1, 2],
            "completion_ids": [3],
            "logprobs": [-0.5],
            "status": 500,
            "error": "x",
            "meta": {"k": 1},
            "token_source": "none",
            "latency_s": 0.25,
        },
        {"session_id": "", "call_index": -1, "dialect": "egress", "not_a_field": 1},  # ignored, as model_construct does
    ],
)
def test_trusted_equals_model_construct(values: dict) -> None:
    a, b = CallRecord.model_construct(**dict(values)), CallRecord.trusted(values)
    assert list(a.__dict__.items()) == list(b.__dict__.items())  # same values in the same (field) order
    assert a.model_fields_set == b.model_fields_set
    assert a.__pydantic_extra__ == b.__pydantic_extra__ and a.__pydantic_private__ == b.__pydantic_private__
    assert orjson.dumps(a.__dict__) == orjson.dumps(b.__dict__)
    assert a.model_dump() == b.model_dump()


def test_trusted_gives_each_record_its_own_mutable_defaults() -> None:
    a = CallRecord.trusted({"session_id": "s", "call_index": 0, "dialect": "anthropic"})
    b = CallRecord.trusted({"session_id": "s", "call_index": 1, "dialect": "anthropic"})
    a.meta["x"] = 1
    a.messages.append({"role": "user", "content": "hi"})
    assert b.meta == {} and b.messages == []


def test_trusted_record_can_be_copied_with_updates() -> None:
    """model_copy(update=...) adds to the fields set (the expert dataset and tree SFT copy proxy records so)."""
    r = CallRecord.trusted({"session_id": "s", "call_index": 0, "dialect": "anthropic"})
    c = r.model_copy(update={"messages": [], "completion_ids": [1, 2]})
    assert c.completion_ids == [1, 2] and r.completion_ids != [1, 2] and "completion_ids" in c.model_fields_set
