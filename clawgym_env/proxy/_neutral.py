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

__all__ = ["ToolIdMap", "message_key", "parse_arguments", "prefix_keys", "text_of"]

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
        calls = [
            (c.get("id", ""), c["function"]["name"], c["function"].get("arguments"))
            for c in message.get("tool_calls") or ()
        ]
        body: Any = ("assistant", (message.get("content") or "").strip(), calls)
    else:
        body = message
    return orjson.dumps(body, option=orjson.OPT_SORT_KEYS)


def prefix_keys(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[bytes]:
    """keys[k] identifies (tools, messages[:k]) for k = 0..len(messages)."""
    h = hashlib.blake2b(orjson.dumps(tools, option=orjson.OPT_SORT_KEYS), digest_size=16)
    keys = [h.digest()]
    for m in messages:
        h.update(b"\x00")
        h.update(message_key(m))
        keys.append(h.copy().digest())
    return keys
