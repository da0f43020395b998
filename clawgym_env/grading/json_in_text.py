"""Every JSON object written anywhere in a free text, found in time linear in the text.

The rubric judge reads JSON objects out of its own reply and out of the agent's work quoted to it
(to tell the judge's verdict from one it copied). An object may start at any ``{``: inside an
unfinished object, or inside a string of another reading. Decoding from every ``{`` in turn
(``JSONDecoder.raw_decode``) is quadratic on text an agent writes: each failed decode counts the
lines up to where it failed, and an unclosed nesting is read again from each of its braces.

Here one reading starts at each ``{`` that no earlier reading took as the start of an object: an
object nested in a reading is found by it when complete, and fails where the reading failed when
not (parsing a value does not depend on what encloses it), so only braces inside a reading's strings
start readings of their own. Two readings that overlap share their quotes with strings and gaps
swapped, so no third can start inside both: no character is read by more than two readings
(besides scans of the token a reading stops at). Objects come with a digest of their content,
computed bottom-up, so that comparing every nested object costs no more than reading them.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MAX_DEPTH", "FoundObject", "json_objects"]

MAX_DEPTH = 64
"""Objects nested deeper than this are left out (deeper values break recursive consumers such as ``str``)."""

_TOKEN = re.compile(
    r"[ \t\n\r]*+(?:([{}\[\]:,])"
    r'|("(?:[^"\\\x00-\x1f]++|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*+")'
    r"|(-?(?:0|[1-9][0-9]*+)(?:\.[0-9]++)?(?:[eE][-+]?[0-9]++)?|true|false|null|NaN|Infinity|-Infinity))"
)
"""One JSON token after optional whitespace, as ``json`` reads them; possessive, so a failed match never backtracks."""
_START = re.compile(r'\{[ \t\n\r]*+["}]')
"""A brace that can start an object: any other fails at its next token, and opens nothing."""
_LITERALS: dict[str, Any] = {
    "true": True,
    "false": False,
    "null": None,
    "NaN": float("nan"),
    "Infinity": float("inf"),
    "-Infinity": float("-inf"),
}


@dataclass(frozen=True)
class FoundObject:
    """A JSON object of the text: where it starts, its value, and its content's digest (keys and strings
    compared without case, key order ignored: what ``judge`` compares to tell a copy)."""

    start: int
    value: dict[str, Any]
    digest: bytes


@dataclass
class _Frame:
    """An object or array being read: its value so far, its members' digests, what token comes next."""

    start: int
    value: dict[str, Any] | list[Any]
    expect: str
    key: str = ""
    parts: dict[str, bytes] | list[bytes] = field(default_factory=list)
    depth: int = 0


def _digest(tag: bytes, body: bytes) -> bytes:
    return hashlib.blake2b(tag + body, digest_size=16).digest()


def _string(token: str) -> str:
    return token[1:-1] if "\\" not in token else json.loads(token)  # the token is valid: the pattern checked it


def _scalar(token: str) -> Any:
    if token in _LITERALS:
        return _LITERALS[token]
    return float(token) if any(c in token for c in ".eE") else int(token)  # int: ValueError past 4,300 digits


def _close(frame: _Frame) -> bytes:
    if isinstance(frame.parts, dict):
        members = sorted(json.dumps(k).lower().encode() + d for k, d in frame.parts.items())
        return _digest(b"{", b"".join(members))
    return _digest(b"[", b"".join(frame.parts))


def _read(text: str, start: int, found: list[FoundObject], opened: set[int]) -> None:
    """One reading from the ``{`` at ``start``: every object it completes goes to ``found``, every ``{`` it
    takes as an object's start to ``opened``; it ends at the first token JSON does not allow there."""
    stack: list[_Frame] = []
    pos = start
    value: Any
    while (m := _TOKEN.match(text, pos)) is not None:
        pos = m.end()
        punct, string, scalar = m.group(1, 2, 3)
        top = stack[-1] if stack else None
        if punct in ("{", "["):
            if top is not None and top.expect not in ("value", "value_or_end"):
                return
            if punct == "{":
                opened.add(pos - 1)
                stack.append(_Frame(pos - 1, {}, "key_or_end", parts={}))
            else:
                stack.append(_Frame(pos - 1, [], "value_or_end"))
            continue
        if top is None:
            return
        is_object = isinstance(top.value, dict)
        if punct in ("}", "]"):
            if (punct == "}") != is_object or top.expect not in ("key_or_end", "value_or_end", "comma_or_end"):
                return
            stack.pop()
            value, digest, depth = top.value, _close(top), top.depth + 1
            if is_object and depth <= MAX_DEPTH:
                found.append(FoundObject(top.start, top.value, digest))  # type: ignore[arg-type]  # an object's value is a dict
            if not stack:
                return
            top = stack[-1]
        elif punct == ":":
            if top.expect != "colon":
                return
            top.expect = "value"
            continue
        elif punct == ",":
            if top.expect != "comma_or_end":
                return
            top.expect = "key" if is_object else "value"
            continue
        elif string is not None and top.expect in ("key", "key_or_end"):
            top.key, top.expect = _string(string), "colon"
            continue
        else:
            if top.expect not in ("value", "value_or_end"):
                return
            try:
                value = _string(string) if string else _scalar(scalar)
            except ValueError:
                return
            digest, depth = _digest(b"s", json.dumps(value).lower().encode()), 0
        if isinstance(top.value, dict):
            top.value[top.key] = value
            top.parts[top.key] = digest  # type: ignore[call-overload]  # parts mirror the value: a dict here
        else:
            top.value.append(value)
            top.parts.append(digest)  # type: ignore[union-attr]  # parts mirror the value: a list here
        top.depth = max(top.depth, depth)
        top.expect = "comma_or_end"


def json_objects(text: str) -> list[FoundObject]:
    """Every JSON object that starts at a ``{`` of ``text`` (nested ones too), in the order they start:
    what ``json.JSONDecoder().raw_decode(text, i)`` gives at each ``{``, in linear time."""
    found: list[FoundObject] = []
    opened: set[int] = set()
    for m in _START.finditer(text):
        if m.start() not in opened:
            _read(text, m.start(), found, opened)
    found.sort(key=lambda o: o.start)
    return found
