"""Gemini API (``models/{model}:generateContent`` / ``:streamGenerateContent``) <-> neutral form.

What Gemini CLI and the ``google-genai`` SDKs send: ``contents`` of ``user``/``model`` turns made
of parts (``text``, ``functionCall``, ``functionResponse``, ``thought`` text), a separate
``systemInstruction``, ``tools[].functionDeclarations`` (``parameters`` in the OpenAPI subset with
upper-case types, or ``parametersJsonSchema``) and ``generationConfig``. Streaming is chosen by the
method in the path (``:streamGenerateContent?alt=sse``), not by the body: the server copies the
path's model and method into the body as ``model`` and ``stream`` before parsing. Function-call ids are ours (the SDKs echo them back in
``functionResponse.id``); a response without an id is matched to the oldest open call of that name.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from clawgym_env.proxy._neutral import ToolIdMap, parse_arguments, text_of
from clawgym_env.proxy.dialects._common import BadRequest, ParsedRequest, Reply, function_tool, guarded, sse

__all__ = [
    "KEEPALIVE",
    "NAME",
    "RESPONSE_ID_PREFIX",
    "TOOL_ID_PREFIX",
    "LiveReply",
    "error_body",
    "parse_request",
    "render_response",
    "render_stream",
    "stream_error",
    "route",
]

NAME = "gemini"
KEEPALIVE = b"\n"
"""google-genai parses every non-blank SSE line as JSON, a comment too: a blank line keeps the stream open."""
TOOL_ID_PREFIX = "call_"
RESPONSE_ID_PREFIX = "gen_"

METHODS = {"generateContent": False, "streamGenerateContent": True, "countTokens": None}
"""Path method -> whether it streams (None: ``countTokens``, answered without a model call)."""

_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    413: "INVALID_ARGUMENT",
    415: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    529: "UNAVAILABLE",
}
_FINISH = {"stop": "STOP", "length": "MAX_TOKENS", "tool_calls": "STOP", "stop_sequence": "STOP"}


def route(path: str) -> tuple[str, str] | None:
    """``/v1beta/models/gemini-x:streamGenerateContent`` -> ("gemini-x", "streamGenerateContent"), else None."""
    for prefix in ("/v1beta/models/", "/v1/models/", "/v1alpha/models/"):
        if path.startswith(prefix):
            model, sep, method = path[len(prefix) :].rpartition(":")
            if sep and model and method in METHODS:
                return model, method
    return None


def error_body(status: int, message: str) -> dict[str, Any]:
    return {"error": {"code": status, "message": message, "status": _STATUS.get(status, "INTERNAL")}}


def _lower_types(schema: Any) -> Any:
    """OpenAPI-subset schemas spell types ``OBJECT``/``STRING``; JSON Schema (and chat templates) use lower case."""
    if isinstance(schema, dict):
        return {k: (v.lower() if k == "type" and isinstance(v, str) else _lower_types(v)) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_lower_types(v) for v in schema]
    return schema


def _tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for t in body.get("tools") or ():
        if not isinstance(t, dict):
            continue
        for fn in t.get("functionDeclarations") or t.get("function_declarations") or ():
            if not isinstance(fn, dict) or "name" not in fn:
                continue
            params = fn.get("parametersJsonSchema") or fn.get("parameters_json_schema") or fn.get("parameters")
            out.append(
                function_tool(fn["name"], fn.get("description"), _lower_types(params) if params else {"type": "object", "properties": {}})
            )
        # googleSearch, codeExecution, urlContext...: server tools the policy cannot call
    return out


def _response_text(response: Any) -> str:
    """A functionResponse's ``response`` object as the text a tool message carries."""
    if isinstance(response, dict) and len(response) == 1:
        (value,) = response.values()
        if isinstance(value, str):
            return value
    return orjson.dumps(response, option=orjson.OPT_SORT_KEYS).decode()


class _Turns:
    """Folds Gemini contents into neutral messages, pairing function responses with their calls."""

    def __init__(self, ids: ToolIdMap) -> None:
        self.ids = ids
        self.out: list[dict[str, Any]] = []
        self.open_calls: list[tuple[str, str]] = []  # (name, id) of calls not answered yet
        self.n_calls = 0

    def model(self, parts: list[Any]) -> None:
        texts: list[str] = []
        thoughts: list[str] = []
        calls: list[dict[str, Any]] = []
        for p in parts:
            if not isinstance(p, dict):
                continue
            fc = p.get("functionCall") or p.get("function_call")
            if isinstance(fc, dict):
                self.n_calls += 1  # a call without an id (not one we issued) gets a stable positional one
                cid = self.ids.canonical(fc.get("id")) or f"call_{self.n_calls}_{fc.get('name', '')}"
                self.open_calls.append((str(fc.get("name", "")), cid))
                calls.append(
                    {"id": cid, "type": "function", "function": {"name": fc.get("name", ""), "arguments": parse_arguments(fc.get("args"))}}
                )
            elif isinstance(p.get("text"), str):
                (thoughts if p.get("thought") else texts).append(p["text"])
        msg: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
        if thoughts:
            msg["reasoning_content"] = "".join(thoughts)
        if calls:
            msg["tool_calls"] = calls
        self.out.append(msg)

    def user(self, parts: list[Any]) -> None:
        texts: list[Any] = []
        for p in parts:
            fr = p.get("functionResponse") or p.get("function_response") if isinstance(p, dict) else None
            if isinstance(fr, dict):
                if texts:
                    self.out.append({"role": "user", "content": text_of(texts)})
                    texts = []
                self.out.append({"role": "tool", "tool_call_id": self._answer(fr), "content": _response_text(fr.get("response"))})
            else:
                texts.append(p)
        if texts:
            self.out.append({"role": "user", "content": text_of(texts)})

    def _answer(self, fr: dict[str, Any]) -> str:
        cid = self.ids.canonical(fr.get("id")) if fr.get("id") else ""
        name = str(fr.get("name", ""))
        for i, (n, c) in enumerate(self.open_calls):
            if (cid and c == cid) or (not cid and n == name):
                del self.open_calls[i]
                return c
        return cid


@guarded
def parse_request(body: dict[str, Any], ids: ToolIdMap) -> ParsedRequest:
    """generateContent body -> neutral messages and tools (``stream`` and ``model`` come from the path)."""
    contents = body.get("contents")
    if isinstance(contents, dict):
        contents = [contents]
    if not isinstance(contents, list):
        raise BadRequest("contents: field required (a list of {role, parts})")
    turns = _Turns(ids)
    system = body.get("systemInstruction") or body.get("system_instruction")
    if system:
        parts = system.get("parts") if isinstance(system, dict) else system
        turns.out.append({"role": "system", "content": text_of(parts, join="\n")})
    for i, c in enumerate(contents):
        if not isinstance(c, dict):
            raise BadRequest(f"contents.{i}: expected an object with role and parts")
        parts = c.get("parts") or []
        if not isinstance(parts, list):
            raise BadRequest(f"contents.{i}.parts: expected a list")
        role = c.get("role", "user")
        if role == "model":
            turns.model(parts)
        elif role in ("user", "function", "tool"):
            turns.user(parts)
        else:
            raise BadRequest(f"contents.{i}.role: {role!r} is not one of user, model")
    gen = body.get("generationConfig") or body.get("generation_config") or {}
    if not isinstance(gen, dict):
        raise BadRequest("generationConfig: expected an object")
    max_tokens = gen.get("maxOutputTokens", gen.get("max_output_tokens"))
    if max_tokens is not None and not isinstance(max_tokens, int):
        raise BadRequest("generationConfig.maxOutputTokens: expected an integer")
    stop = gen.get("stopSequences") or gen.get("stop_sequences") or []
    return ParsedRequest(
        messages=turns.out,
        tools=_tools(body),
        model=str(body.get("model", "")),
        stream=bool(body.get("stream")),
        max_tokens=max_tokens,
        temperature=gen.get("temperature"),
        top_p=gen.get("topP", gen.get("top_p")),
        stop=[stop] if isinstance(stop, str) else list(stop),
        seed=gen.get("seed"),
    )


def _parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if message.get("reasoning_content"):
        parts.append({"text": message["reasoning_content"], "thought": True})
    if message.get("content") or not message.get("tool_calls"):
        parts.append({"text": message.get("content") or ""})
    for c in message.get("tool_calls") or ():
        args = c["function"]["arguments"]
        parts.append({"functionCall": {"id": c["id"], "name": c["function"]["name"], "args": args if isinstance(args, dict) else {}}})
    return parts


def _usage(reply: Reply) -> dict[str, int]:
    return {
        "promptTokenCount": reply.prompt_tokens,
        "candidatesTokenCount": reply.completion_tokens,
        "totalTokenCount": reply.prompt_tokens + reply.completion_tokens,
    }


def _chunk(reply: Reply, parts: list[dict[str, Any]], finish: str | None) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish is not None:
        cand["finishReason"] = finish
    return {"candidates": [cand], "usageMetadata": _usage(reply), "modelVersion": reply.model, "responseId": reply.response_id}


def render_response(reply: Reply) -> dict[str, Any]:
    """Non-streaming GenerateContentResponse."""
    return _chunk(reply, _parts(reply.message), _FINISH.get(reply.finish_reason, "STOP"))


def render_stream(reply: Reply, include_usage: bool = False) -> Iterator[bytes]:
    """``alt=sse`` frames, one GenerateContentResponse each: thought, text, function calls; the last carries
    ``finishReason``."""
    parts = _parts(reply.message)
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        yield sse(_chunk(reply, [part], _FINISH.get(reply.finish_reason, "STOP") if last else None))


class LiveReply:
    """A stream sent while the policy decodes: one text chunk per settled delta; thought and calls at the end."""

    def __init__(self, head: Reply, include_usage: bool = False) -> None:
        self.head = head

    def start(self) -> bytes:
        return b""  # Gemini streams have no opening event

    def text(self, text: str) -> bytes:
        return sse(_chunk(self.head, [{"text": text}], None))

    def finish(self, reply: Reply, sent: str) -> bytes:
        """What is left once ``reply`` is known, ``sent`` (a prefix of its content) having gone out already."""
        rest = (reply.message.get("content") or "")[len(sent) :]
        parts = [p for p in _parts(reply.message) if "text" not in p or p.get("thought")]
        parts = [{"text": rest}, *parts] if rest or not parts else parts
        return b"".join(
            sse(_chunk(reply, [p], _FINISH.get(reply.finish_reason, "STOP") if i == len(parts) - 1 else None)) for i, p in enumerate(parts)
        )


def stream_error(status: int, message: str) -> bytes:
    """An error after the stream started: the API's error object as one more SSE frame."""
    return sse(error_body(status, message))
