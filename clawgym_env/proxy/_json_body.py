"""A request body as JSON, with its nesting bounded: what the proxy parses before any dialect sees it.

orjson < 3.9.15 segfaulted on 100k nested arrays, and the proxy's own Python (``text_of``, the capture
encoder) must never recurse past what it can take; so a body nesting deeper than MAX_JSON_DEPTH is
refused with a 400, whatever field holds the nesting.
"""

from __future__ import annotations

import itertools
import operator
import re
from typing import Any

import orjson

from clawgym_env.proxy._asgi import Disconnected
from clawgym_env.proxy.session import CallFailed

__all__ = ["MAX_JSON_DEPTH", "load_body", "read_json"]

MAX_JSON_DEPTH = 256
"""Deepest JSON nesting a request body may have; refused before parsing (real bodies nest < 20)."""
_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"?')
"""A JSON string; an unclosed one runs to the end (with the closing quote required, every quote after an
unclosed one rescanned to the end: quadratic in a body the agent's own code can send)."""
_STEP = bytes(2 if c in b"[{" else 0 for c in range(256))
_NOT_BRACKET = bytes(c for c in range(256) if c not in b"[]{}")


def _deeper_than_limit(text: bytes) -> bool:
    steps = text.translate(_STEP, _NOT_BRACKET)  # 2 per opening bracket, 0 per closing one
    for peeled in range(16):  # each pass removes the innermost pairs: real bodies end empty here, in C
        if len(steps) <= MAX_JSON_DEPTH - peeled:
            return False
        steps = steps.replace(b"\x02\x00", b"")
    # exact and linear (C-level iterators): depth after i steps = (sum of the first i) - i
    return 16 + max(map(operator.sub, itertools.accumulate(steps), itertools.count(1))) > MAX_JSON_DEPTH


def _too_deep(raw: bytes) -> bool:
    """True if ``raw`` nests deeper than MAX_JSON_DEPTH. Brackets alone first (they can only
    overestimate: a string may hold some); strings are stripped only when that says "deep"."""
    return _deeper_than_limit(raw) and _deeper_than_limit(_STRING.sub(b"", raw))


def load_body(raw: bytes) -> Any:
    """``orjson.loads(raw)``, refusing (CallFailed 400) a body that nests deeper than MAX_JSON_DEPTH or is not JSON.

    Parsing comes first: orjson (>= 3.9.15, pinned) stops at depth 1024 by itself. A parsed body that orjson
    encodes again nests < 255 levels (its encoder's limit), which settles a real body in one C pass (~8 us for
    44 kB) instead of the bracket scan of ``_too_deep`` (~27 us); whatever fails to parse or to encode gets
    that exact scan, so the answer is the scan's for every body.
    """
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        body, error = None, f"request body is not valid JSON: {exc}"
    else:
        try:
            orjson.dumps(body)
            return body
        except orjson.JSONEncodeError:
            error = ""
    if _too_deep(raw):
        raise CallFailed(400, f"request body nests JSON deeper than {MAX_JSON_DEPTH} levels")
    if error:
        raise CallFailed(400, error)
    return body


async def read_json(receive: Any, headers: dict[bytes, bytes], max_bytes: int) -> dict[str, Any]:
    """The request's JSON object body (415 for another content type, 413 past ``max_bytes``, 400 for what
    ``load_body`` refuses or a non-object); raises Disconnected if the client hangs up first."""
    ctype = headers.get(b"content-type", b"application/json").split(b";")[0].strip().lower()
    if ctype != b"application/json" and not ctype.endswith(b"+json"):
        raise CallFailed(415, f"content-type {ctype.decode('latin-1')!r} is not supported; send application/json")
    declared = headers.get(b"content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise CallFailed(413, f"request body of {int(declared)} bytes exceeds the limit of {max_bytes}")
    chunks: list[bytes] = []
    size = 0
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            raise Disconnected
        chunk = msg.get("body", b"")
        size += len(chunk)
        if size > max_bytes:
            raise CallFailed(413, f"request body exceeds the limit of {max_bytes} bytes")
        chunks.append(chunk)
        if not msg.get("more_body", False):
            break
    body = load_body(b"".join(chunks))
    if not isinstance(body, dict):
        raise CallFailed(400, "request body must be a JSON object")
    return body
