"""OpenAI Responses (``/v1/responses``) <-> neutral form, with its typed SSE events.

Input items (messages, function_call, function_call_output, reasoning) fold into neutral
messages: function calls join the preceding assistant turn, reasoning joins the next one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from clawgym_env.proxy._neutral import ToolIdMap, parse_arguments, text_of
from clawgym_env.proxy.dialects._common import (
    BadRequest,
    ParsedRequest,
    Reply,
    args_json,
    function_tool,
    guarded,
    parsed_request,
    sse,
)
from clawgym_env.proxy.dialects.openai_chat import error_body

__all__ = ["NAME", "RESPONSE_ID_PREFIX", "TOOL_ID_PREFIX", "error_body", "parse_request", "render_response", "render_stream"]

NAME = "openai-responses"
TOOL_ID_PREFIX = "call_"
RESPONSE_ID_PREFIX = "resp_"


def _tool(t: dict[str, Any]) -> dict[str, Any] | None:
    if t.get("type") != "function" or "name" not in t:
        return None
    return function_tool(t["name"], t.get("description"), t.get("parameters") or {"type": "object", "properties": {}})


@guarded
def parse_request(body: dict[str, Any], ids: ToolIdMap) -> ParsedRequest:
    """Responses body -> neutral messages and tools."""
    if body.get("previous_response_id"):
        raise BadRequest("previous_response_id is not supported: the proxy keeps no response store; "
                         "send the whole conversation in `input` (store=false)")
    raw = body.get("input")
    if raw is None:
        raise BadRequest("input: field required (a string or a list of items)")
    items = [{"role": "user", "content": raw}] if isinstance(raw, str) else raw
    if not isinstance(items, list):
        raise BadRequest("input: expected a string or a list of items")
    out: list[dict[str, Any]] = []
    if body.get("instructions"):
        out.append({"role": "system", "content": text_of(body["instructions"])})
    pending_reasoning: list[str] = []

    def open_assistant() -> dict[str, Any]:
        if out and out[-1]["role"] == "assistant" and not pending_reasoning:
            return out[-1]
        msg: dict[str, Any] = {"role": "assistant", "content": ""}
        if pending_reasoning:
            msg["reasoning_content"] = "\n".join(pending_reasoning)
            pending_reasoning.clear()
        out.append(msg)
        return msg

    for i, it in enumerate(items):
        if not isinstance(it, dict):
            raise BadRequest(f"input.{i}: expected an object")
        kind = it.get("type", "message")
        if kind == "message":
            role = it.get("role")
            if role in ("system", "developer"):
                out.append({"role": "system", "content": text_of(it.get("content"))})
            elif role == "user":
                out.append({"role": "user", "content": text_of(it.get("content"))})
            elif role == "assistant":
                if pending_reasoning:
                    msg = open_assistant()
                else:
                    msg = {"role": "assistant", "content": ""}
                    out.append(msg)
                msg["content"] = (msg["content"] + "\n" if msg["content"] else "") + text_of(it.get("content"))
            else:
                raise BadRequest(f"input.{i}.role: {role!r} is not one of system, developer, user, assistant")
        elif kind == "function_call":
            msg = open_assistant()
            msg.setdefault("tool_calls", []).append(
                {"id": ids.canonical(it.get("call_id")), "type": "function",
                 "function": {"name": it.get("name", ""), "arguments": parse_arguments(it.get("arguments"))}})
        elif kind == "function_call_output":
            out.append({"role": "tool", "tool_call_id": ids.canonical(it.get("call_id")),
                        "content": text_of(it.get("output"))})
        elif kind == "reasoning":
            summary = "\n".join(s.get("text", "") for s in it.get("summary") or () if isinstance(s, dict))
            content = "\n".join(s.get("text", "") for s in it.get("content") or () if isinstance(s, dict))
            if summary or content:
                pending_reasoning.append(content or summary)
        # other item types (item_reference, web_search_call, ...) carry nothing the policy can use
    return parsed_request(body, out, _tool, body.get("max_output_tokens"), "max_output_tokens")


def _items(reply: Reply) -> list[dict[str, Any]]:
    m = reply.message
    rid = reply.response_id.removeprefix("resp_")
    items: list[dict[str, Any]] = []
    if m.get("reasoning_content"):
        items.append({"type": "reasoning", "id": f"rs_{rid}", "status": "completed",
                      "summary": [{"type": "summary_text", "text": m["reasoning_content"]}]})
    if m.get("content") or not m.get("tool_calls"):
        items.append({"type": "message", "id": f"msg_{rid}", "status": "completed", "role": "assistant",
                      "content": [{"type": "output_text", "text": m.get("content") or "", "annotations": [],
                                   "logprobs": []}]})
    for c in m.get("tool_calls") or ():
        items.append({"type": "function_call", "id": "fc_" + c["id"].removeprefix("call_"), "call_id": c["id"],
                      "name": c["function"]["name"], "arguments": args_json(c["function"]["arguments"]),
                      "status": "completed"})
    return items


def _response(reply: Reply, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    done = status == "completed"
    incomplete = reply.finish_reason == "length" and done
    return {
        "id": reply.response_id,
        "object": "response",
        "created_at": reply.created,
        "status": "incomplete" if incomplete else status,
        "model": reply.model,
        "output": output,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "instructions": None,
        "metadata": {},
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "temperature": None,
        "top_p": None,
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "usage": {"input_tokens": reply.prompt_tokens, "output_tokens": reply.completion_tokens,
                  "total_tokens": reply.prompt_tokens + reply.completion_tokens,
                  "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens_details": {"reasoning_tokens": 0}} if done else None,
    }


def render_response(reply: Reply) -> dict[str, Any]:
    """Non-streaming response object."""
    return _response(reply, "completed", _items(reply))


def render_stream(reply: Reply) -> Iterator[bytes]:
    """response.created … output_item.added/deltas/done … response.completed."""
    seq = 0

    def ev(kind: str, payload: dict[str, Any]) -> bytes:
        nonlocal seq
        frame = sse({"type": kind, "sequence_number": seq, **payload}, kind)
        seq += 1
        return frame

    yield ev("response.created", {"response": _response(reply, "in_progress", [])})
    yield ev("response.in_progress", {"response": _response(reply, "in_progress", [])})
    items = _items(reply)
    for idx, item in enumerate(items):
        kind = item["type"]
        if kind == "message":
            text = item["content"][0]["text"]
            yield ev("response.output_item.added",
                     {"output_index": idx, "item": {**item, "status": "in_progress", "content": []}})
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            base = {"item_id": item["id"], "output_index": idx, "content_index": 0}
            yield ev("response.content_part.added", {**base, "part": part})
            if text:
                yield ev("response.output_text.delta", {**base, "delta": text, "logprobs": []})
            yield ev("response.output_text.done", {**base, "text": text, "logprobs": []})
            yield ev("response.content_part.done", {**base, "part": item["content"][0]})
        elif kind == "function_call":
            yield ev("response.output_item.added",
                     {"output_index": idx, "item": {**item, "status": "in_progress", "arguments": ""}})
            base = {"item_id": item["id"], "output_index": idx}
            yield ev("response.function_call_arguments.delta", {**base, "delta": item["arguments"]})
            yield ev("response.function_call_arguments.done",
                     {**base, "name": item["name"], "arguments": item["arguments"]})
        else:  # reasoning
            text = item["summary"][0]["text"]
            yield ev("response.output_item.added", {"output_index": idx, "item": {**item, "summary": []}})
            base = {"item_id": item["id"], "output_index": idx, "summary_index": 0}
            yield ev("response.reasoning_summary_part.added", {**base, "part": {"type": "summary_text", "text": ""}})
            yield ev("response.reasoning_summary_text.delta", {**base, "delta": text})
            yield ev("response.reasoning_summary_text.done", {**base, "text": text})
            yield ev("response.reasoning_summary_part.done", {**base, "part": item["summary"][0]})
        yield ev("response.output_item.done", {"output_index": idx, "item": item})
    yield ev("response.completed", {"response": _response(reply, "completed", items)})


def stream_error(status: int, message: str) -> bytes:
    body = error_body(status, message)["error"]
    return sse({"type": "error", "code": body["code"], "message": message, "param": None, "sequence_number": 0}, "error")
