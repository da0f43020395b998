"""The proxy refuses request bodies nested deeper than MAX_JSON_DEPTH before parsing them
(orjson < 3.9.15 segfaulted on 100k nested arrays, taking the whole run with it)."""

from __future__ import annotations

import json

import pytest

from clawgym_env.proxy.server import MAX_JSON_DEPTH, _too_deep


@pytest.mark.parametrize(
    ("body", "deep"),
    [
        (b"[" * 100_000 + b"]" * 100_000, True),
        (b'{"a":' * (MAX_JSON_DEPTH + 1) + b"1" + b"}" * (MAX_JSON_DEPTH + 1), True),
        (b'{"a":' * MAX_JSON_DEPTH + b"1" + b"}" * MAX_JSON_DEPTH, False),
        (b"[" * 250 + b"[[[[[[[]]]]]]]" * 1000 + b"]" * 250, True),  # depth 257, hidden behind many pairs
        (b"[" * 240 + b"[]" * 1000 + b"]" * 240, False),
        (json.dumps({"text": "[" * 5000 + "{" * 5000}).encode(), False),  # brackets inside a string do not nest
        (json.dumps({"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}] * 2000}).encode(), False),
    ],
)
def test_nesting_bound(body: bytes, deep: bool) -> None:
    assert _too_deep(body) is deep
