"""The proxy refuses request bodies nested deeper than MAX_JSON_DEPTH before parsing them
(orjson < 3.9.15 segfaulted on 100k nested arrays, taking the whole run with it)."""

from __future__ import annotations

import json

import pytest

from clawgym_env.proxy._json_body import MAX_JSON_DEPTH, _too_deep


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


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000 + b"]" * 100_000,  # past orjson's own parse limit (1024)
        b'{"a":' * (MAX_JSON_DEPTH + 1) + b"1" + b"}" * (MAX_JSON_DEPTH + 1),
        b'{"a":' * MAX_JSON_DEPTH + b"1" + b"}" * MAX_JSON_DEPTH,  # parses, too deep for orjson to encode: exact scan
        b"[" * 254 + b"]" * 254,  # orjson encodes it again: no scan
        b"[" * 250 + b"[[[[[[[]]]]]]]" * 1000 + b"]" * 250,
        b"[" * 300 + b"]" * 299,  # deep and invalid: the depth is what is reported
        b"[" * 10 + b"]" * 9,
        json.dumps({"text": "[" * 5000 + "{" * 5000}).encode(),
    ],
)
def test_load_body_refuses_exactly_what_the_scan_finds_too_deep(body: bytes) -> None:
    """``load_body`` parses first and scans only what orjson cannot encode again: same verdicts as the scan alone."""
    import orjson

    from clawgym_env.proxy._json_body import load_body
    from clawgym_env.proxy.session import CallFailed

    try:
        expected: object = orjson.loads(body)
    except orjson.JSONDecodeError:
        expected = "invalid"
    if _too_deep(body):
        expected = "deep"
    try:
        got: object = load_body(body)
    except CallFailed as exc:
        assert exc.status == 400
        got = "deep" if "deeper than" in exc.message else "invalid" if "not valid JSON" in exc.message else exc.message
    assert got == expected
