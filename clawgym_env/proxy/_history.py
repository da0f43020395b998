"""Reusing what a harness resends: the previous call's message objects and their JSON.

A harness sends its whole history (and its tool schemas, ~40 kB for Claude Code) on every call.
Parsing yields fresh objects each time; keeping them in every call record made each record
O(history) objects for the cyclic GC to scan again and again, and the capture line re-encoded the
whole history on every call. When a message (or the tool list) serialises to the same bytes as
the one the previous call had at the same place, the earlier object is used instead (bytes, not
``==``: ``1 == 1.0 == True``; only a message whose values are all str is compared without encoding
it), so the record, the capture line and the prompt are byte-identical to the unshared ones, and
the capture line splices the JSON in rather than encoding it again.
Each message's JSON is kept as an ``orjson.Fragment``: the capture encodes the list of them as the
same bytes as one joined array, without joining (and copying) the whole history first.
"""

from __future__ import annotations

import hashlib
from typing import Any, NamedTuple

import orjson

from clawgym_env.capture.store import JSON_OPTIONS

__all__ = ["SharedHistory", "SharedRequest"]

Json = bytes


class SharedRequest(NamedTuple):
    """What ``SharedHistory.share`` gives back."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    messages_json: list[orjson.Fragment]
    """Each message's JSON: ``orjson.dumps(messages_json) == orjson.dumps(messages)``."""
    tools_json: orjson.Fragment
    json_size: int
    """``len(orjson.dumps(messages)) + len(orjson.dumps(tools))``."""


class SharedHistory:
    """One session's last request in neutral form, each message with its JSON (``orjson.dumps``)."""

    def __init__(self) -> None:
        self._messages: list[tuple[dict[str, Any], Json, orjson.Fragment]] = []
        self._tools: tuple[list[dict[str, Any]], Json, orjson.Fragment] = ([], b"[]", orjson.Fragment(b"[]"))
        self._system: tuple[dict[str, Any] | None, str] = (None, "")

    def share(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> SharedRequest:
        """``messages`` and ``tools`` with earlier equal objects substituted, and their JSON."""
        prev = self._messages
        n_prev = len(prev)
        out: list[tuple[dict[str, Any], Json, orjson.Fragment]] = []
        size = 2 + max(len(messages) - 1, 0)  # the array's brackets and commas
        for i, m in enumerate(messages):
            if i < n_prev and _same_text_message(m, prev[i][0]):
                entry = prev[i]
            else:
                j = _dumps(m)
                entry = prev[i] if i < n_prev and prev[i][1] == j else (m, j, orjson.Fragment(j))
            size += len(entry[1])
            out.append(entry)
        self._messages = out
        tj = _dumps(tools)
        if tj != self._tools[1]:
            self._tools = (tools, tj, orjson.Fragment(tj))
        return SharedRequest([e[0] for e in out], self._tools[0], [e[2] for e in out], self._tools[2], size + len(tj))

    def system_hash(self, messages: list[dict[str, Any]]) -> str | None:
        """Short digest of the system prompt (which agent prompt a call ran under), once per system message."""
        if not messages or messages[0]["role"] != "system":
            return None
        if self._system[0] is not messages[0]:
            digest = hashlib.blake2b(messages[0]["content"].encode(), digest_size=6).hexdigest()
            self._system = (messages[0], digest)
        return self._system[1]


def _same_text_message(m: dict[str, Any], old: dict[str, Any]) -> bool:
    """True when ``m`` encodes to ``old``'s JSON, known without encoding it: the same keys in the same order with
    equal values, each of them a str (for str, ``==`` is equality of the encoded bytes; for numbers it is not). Most
    of a resent history is such messages (system, user, tool results), the largest ones (the system prompt) too."""
    if m != old or list(m) != list(old):
        return False
    for v in m.values():
        if type(v) is not str:
            return False
    return True


def _dumps(value: Any) -> Json:
    """``orjson.dumps(value, option=JSON_OPTIONS)``, through orjson's default path when it takes the value: parsed
    request JSON always has str keys and no numpy, and then both give the same bytes (``OPT_NON_STR_KEYS``
    alone made a tool list 3x slower to encode)."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return orjson.dumps(value, option=JSON_OPTIONS)
