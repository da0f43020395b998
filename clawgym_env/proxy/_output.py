"""Model text -> structured assistant turn (reasoning, content, Hermes/Qwen tool calls).

Templates in the Qwen/Hermes family emit ``<think>…</think>`` and
``<tool_call>{"name": …, "arguments": …}</tool_call>``. A tool call whose JSON does not parse
stays in the content as plain text, so the harness sees what the model wrote and the episode
goes on (the model is what is being trained, its mistakes are data).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

__all__ = ["parse_model_output"]

_TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)


def _one_call(raw: str) -> dict[str, Any] | None:
    try:
        obj = orjson.loads(raw.strip())
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = orjson.loads(args)
        except orjson.JSONDecodeError:
            return None
    if not isinstance(args, dict):
        return None
    return {"name": obj["name"], "arguments": args}


def parse_model_output(text: str) -> dict[str, Any]:
    """Split raw completion text into {"content", "reasoning_content", "tool_calls"}.

    ``tool_calls`` entries are {"name", "arguments": dict}; ids are assigned by the session.
    """
    reasoning = ""
    rest = text
    if "</think>" in text:
        start = text.find("<think>")
        end = text.find("</think>", start + 1 if start >= 0 else 0)
        if end >= 0:  # no <think>: the template opened it in the generation prompt (Qwen3)
            reasoning = text[start + 7 if start >= 0 else 0 : end].strip()
            rest = (text[:start] if start >= 0 else "") + text[end + 8 :]
    calls: list[dict[str, Any]] = []
    if "<tool_call>" in rest:
        kept: list[str] = []
        pos = 0
        for m in _TOOL_CALL.finditer(rest):
            call = _one_call(m.group(1))
            kept.append(rest[pos : m.start()])
            if call is None:
                kept.append(m.group(0))  # malformed: the harness sees it as text
            else:
                calls.append(call)
            pos = m.end()
        kept.append(rest[pos:])
        rest = "".join(kept)
    return {"content": rest.strip(), "reasoning_content": reasoning, "tool_calls": calls}
