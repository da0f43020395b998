"""The one neutral message form every dialect translates into, and what keeps it stable.

Neutral messages are shaped the way HF chat templates take them::

    {"role": "system" | "user" | "assistant" | "tool", "content": str,
     "tool_calls": [{"id", "type": "function", "function": {"name", "arguments": dict | str}}],
     "tool_call_id": str, "reasoning_content": str}

Harnesses change things between calls that carry no meaning for the model (cache_control,
string vs block content, key order, tool-call ids with the underscore dropped). Dialect
parsers drop the first three; ``ToolIdMap`` undoes the last; ``message_key`` gives the
canonical bytes the TITO prefix index compares.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from typing import Any

import orjson

__all__ = ["HistoryKeys", "ToolIdMap", "history_keys", "message_key", "parse_arguments", "text_of"]

_NON_ALNUM = re.compile(r"[^A-Za-z0-9]")


class ToolIdMap:
    """Per-session map from any spelling of a tool-call id we issued back to the id we issued."""

    def __init__(self) -> None:
        self._by_norm: dict[str, str] = {}

    def issue(self, prefix: str) -> str:
        """A fresh id (``toolu_…``/``call_…``) whose normalised form is unique in this session."""
        while True:
            new = f"{prefix}{secrets.token_hex(12)}"
            norm = _NON_ALNUM.sub("", new)
            if norm not in self._by_norm:
                self._by_norm[norm] = new
                return new

    def canonical(self, tool_id: str | None) -> str:
        """The id we issued for ``tool_id`` in any spelling, else ``tool_id`` unchanged."""
        if not tool_id:
            return ""
        if not isinstance(tool_id, str):
            tool_id = str(tool_id)
        return self._by_norm.get(_NON_ALNUM.sub("", tool_id), tool_id)

    def __len__(self) -> int:
        return len(self._by_norm)


def text_of(content: Any, *, join: str = "\n") -> str:
    """Flatten string-or-blocks content to text; non-text parts become short placeholders."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    elif not isinstance(content, list):
        return str(content)
    parts: list[str] = []
    for part in content:
        if isinstance(part, str):
            parts.append(part)
            continue
        if not isinstance(part, dict):
            continue
        kind = part.get("type", "text")
        if "text" in part and isinstance(part["text"], str):
            parts.append(part["text"])
        elif kind in ("image", "input_image", "image_url"):
            parts.append("[image]")
        elif kind in ("document", "input_file", "file"):
            parts.append("[file]")
        elif kind == "tool_result":  # nested (rare): flatten its content
            parts.append(text_of(part.get("content"), join=join))
    return join.join(parts)


def parse_arguments(arguments: Any) -> dict[str, Any] | str:
    """Tool-call arguments as a dict when they are a JSON object, else the string unchanged."""
    if isinstance(arguments, dict):
        return arguments
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, str):
        try:
            parsed = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return arguments
        return parsed if isinstance(parsed, dict) else arguments
    return str(arguments)


def message_key(message: dict[str, Any]) -> bytes:
    """Canonical bytes of a message for prefix matching.

    Assistant turns compare on stripped content and tool calls only: harnesses often drop or
    re-wrap the reasoning they were given, yet the turn is the same one we sampled.
    """
    role = message.get("role")
    if role == "assistant":
        calls = [(c.get("id", ""), c["function"]["name"], c["function"].get("arguments")) for c in message.get("tool_calls") or ()]
        body: Any = ("assistant", (message.get("content") or "").strip(), calls)
    else:
        body = message
    return orjson.dumps(body, option=orjson.OPT_SORT_KEYS)


class HistoryKeys:
    """Both key chains of (tools, messages[:k]) for k = 0..len(messages), in one pass over the history.

    ``prefix`` keys compare turns the TITO prefix index's way (``message_key``: assistant turns on their
    content and tool calls); ``exact`` keys identify the rendered prefix byte for byte (each message's JSON as
    it is). A harness resends its history, so each message's JSON is compared with the one at its place in the
    previous list and, while they agree, that list's keys are reused: only what is new is hashed.
    """

    def __init__(self) -> None:
        self._tools = b"\x00"  # not any tool list's JSON
        self._seed: tuple[Any, Any] = (None, None)
        self._last: list[tuple[bytes, bytes, bytes, Any, Any]] = []  # per message: json, prefix, exact, states

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> tuple[list[bytes], list[bytes]]:
        tj = orjson.dumps(tools)
        if tj != self._tools:
            h = hashlib.blake2b(tj, digest_size=16)
            self._tools, self._seed, self._last = tj, (h, h.copy()), []
        hp, he = self._seed
        prefix, exact = [hp.digest()], [he.digest()]
        last = self._last
        out: list[tuple[bytes, bytes, bytes, Any, Any]] = []
        same = True  # messages[:i] are the previous list's, so its keys hold up to here
        for i, m in enumerate(messages):
            j = orjson.dumps(m)
            same = same and i < len(last) and last[i][0] == j
            if same:
                entry = last[i]
            else:
                hp, he = (out[-1][3], out[-1][4]) if out else self._seed
                hp, he = hp.copy(), he.copy()
                hp.update(b"\x00")
                hp.update(message_key(m) if m.get("role") == "assistant" else j)
                he.update(b"\x01")
                he.update(j)
                entry = (j, hp.digest(), he.digest(), hp, he)
            out.append(entry)
            prefix.append(entry[1])
            exact.append(entry[2])
        self._last = out
        return prefix, exact


def history_keys(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> tuple[list[bytes], list[bytes]]:
    """``HistoryKeys`` without memory of an earlier list."""
    return HistoryKeys()(messages, tools)
