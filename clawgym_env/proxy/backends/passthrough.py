"""Hosted-API policies (OpenAI Chat Completions, Anthropic Messages): evaluation only.

A hosted API returns text, not token ids, so nothing it produces can be trained on: these
backends are message-level (``TOKEN_LEVEL = False``), read the neutral ``messages``/``tools`` of
the request, and return an already-structured assistant turn with ``token_source="none"``, which
the proxy records in the capture. The neutral messages are HF chat-template shaped (OpenAI-style
``tool_calls``, ``role: "tool"``); each backend converts them to its API and back.
"""

from __future__ import annotations

import json
from typing import Any

from clawgym_env.errors import PolicyBackendError
from clawgym_env.proxy.backends._http import JSONClient
from clawgym_env.proxy.backends.base import Completion, CompletionRequest, PolicyBackend

__all__ = ["AnthropicPassthrough", "OpenAIPassthrough"]


def _api_root(base_url: str) -> str:
    """``https://host`` or ``https://host/v1`` -> ``https://host/v1``."""
    base = base_url.rstrip("/")
    return base if base.endswith("/v1") else base + "/v1"


def _text(content: Any) -> str:
    """String or list-of-parts content as plain text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(p if isinstance(p, str) else p.get("text", "") for p in content if isinstance(p, (str, dict)))


def _args_dict(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return arguments  # malformed JSON stays visible as a string
    return arguments if arguments is not None else {}


def _call_fn(call: dict[str, Any]) -> dict[str, Any]:
    return call.get("function", call)


class _Passthrough(PolicyBackend):
    TOKEN_LEVEL = False
    what = "API"

    def __init__(self, base_url: str, model: str, api_key: str | None, headers: dict[str, str], timeout: float) -> None:
        self.base_url = _api_root(base_url)
        self.model = model
        self.api_key = api_key
        self._http = JSONClient(self.base_url, headers=headers, timeout=timeout)

    @property
    def model_name(self) -> str:
        return self.model

    async def aclose(self) -> None:
        await self._http.aclose()


class OpenAIPassthrough(_Passthrough):
    """``POST /v1/chat/completions`` of an OpenAI-compatible API (non-streaming)."""

    name = "openai"
    what = "OpenAI-compatible API"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout: float = 600.0,
        max_tokens_field: str = "max_tokens",
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        super().__init__(base_url, model, api_key, headers, timeout)
        self.max_tokens_field = max_tokens_field
        """``max_completion_tokens`` for OpenAI reasoning models, which refuse ``max_tokens``."""

    def request_body(self, request: CompletionRequest) -> dict[str, Any]:
        """The Chat Completions body for ``request``."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [self._message(m) for m in request.messages],
            self.max_tokens_field: request.max_tokens,
            "temperature": request.temperature,
            "top_p": request.top_p,
            "stream": False,
        }
        if request.tools:
            body["tools"] = request.tools
        if request.stop:
            body["stop"] = list(request.stop)
        if request.seed is not None:
            body["seed"] = request.seed
        return body

    @staticmethod
    def _message(m: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in m.items() if k not in ("reasoning_content", "tool_calls")}
        if m.get("tool_calls"):
            calls = []
            for i, c in enumerate(m["tool_calls"]):
                fn = _call_fn(c)
                args = fn.get("arguments", {})
                calls.append(
                    {
                        "id": c.get("id") or f"call_{i}",
                        "type": "function",
                        "function": {"name": fn["name"], "arguments": args if isinstance(args, str) else json.dumps(args)},
                    }
                )
            out["tool_calls"] = calls
            out.setdefault("content", None)
        return out

    async def handle(self, request: CompletionRequest) -> Completion:
        data = await self._http.request("POST", "/chat/completions", self.request_body(request), what=self.what)
        try:
            choice = data["choices"][0]
            msg = choice["message"]
        except (KeyError, IndexError, TypeError) as exc:
            raise PolicyBackendError(f"{self.what} at {self.base_url}: response has no choices[0].message: {str(data)[:300]}") from exc
        calls = [{"name": _call_fn(c)["name"], "arguments": _args_dict(_call_fn(c).get("arguments"))} for c in msg.get("tool_calls") or ()]
        content = _text(msg.get("content"))
        reasoning = msg.get("reasoning_content") or msg.get("reasoning") or ""
        usage = data.get("usage") or {}
        return Completion(
            completion_ids=None,
            logprobs=None,
            text=content,
            finish_reason="length" if choice.get("finish_reason") == "length" else "stop",
            structured={"content": content, "reasoning_content": reasoning, "tool_calls": calls},
            usage={k: usage[k] for k in ("prompt_tokens", "completion_tokens") if isinstance(usage.get(k), int)},
            token_source="none",
        )


class AnthropicPassthrough(_Passthrough):
    """``POST /v1/messages`` of the Anthropic API (non-streaming)."""

    name = "anthropic"
    what = "Anthropic API"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout: float = 600.0,
        anthropic_version: str = "2023-06-01",
    ) -> None:
        headers = {"anthropic-version": anthropic_version}
        if api_key:
            headers["x-api-key"] = api_key
        super().__init__(base_url, model, api_key, headers, timeout)

    def request_body(self, request: CompletionRequest) -> dict[str, Any]:
        """The Messages body for ``request``: system turns lifted out, tool results as user blocks."""
        system, messages = to_anthropic_messages(request.messages)
        body: dict[str, Any] = {"model": self.model, "max_tokens": request.max_tokens, "messages": messages}
        if system:
            body["system"] = system
        if request.tools:
            body["tools"] = [
                {
                    "name": t["function"]["name"],
                    "description": t["function"].get("description", ""),
                    "input_schema": t["function"].get("parameters") or {"type": "object", "properties": {}},
                }
                for t in request.tools
            ]
        body["temperature"] = request.temperature
        if request.top_p < 1.0:  # newer Claude models refuse temperature and top_p together at defaults
            body["top_p"] = request.top_p
        if request.stop:
            body["stop_sequences"] = list(request.stop)
        return body

    async def handle(self, request: CompletionRequest) -> Completion:
        data = await self._http.request("POST", "/messages", self.request_body(request), what=self.what)
        if not isinstance(data, dict) or not isinstance(data.get("content"), list):
            raise PolicyBackendError(f"{self.what} at {self.base_url}: response has no content list: {str(data)[:300]}")
        text, reasoning, calls = [], [], []
        for block in data["content"]:
            kind = block.get("type")
            if kind == "text":
                text.append(block.get("text", ""))
            elif kind == "thinking":
                reasoning.append(block.get("thinking", ""))
            elif kind == "tool_use":
                calls.append({"name": block["name"], "arguments": block.get("input") or {}})
        content = "".join(text)
        usage = data.get("usage") or {}
        return Completion(
            completion_ids=None,
            logprobs=None,
            text=content,
            finish_reason="length" if data.get("stop_reason") == "max_tokens" else "stop",
            structured={"content": content, "reasoning_content": "".join(reasoning), "tool_calls": calls},
            usage={
                "prompt_tokens": int(usage.get("input_tokens", 0)),
                "completion_tokens": int(usage.get("output_tokens", 0)),
            },
            token_source="none",
        )


def to_anthropic_messages(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """Neutral messages -> (system text, Anthropic messages with strictly alternating roles).

    Tool calls without ids get ``toolu_N`` ids, matched in order to the tool results that follow.
    Reasoning is dropped: Anthropic only accepts thinking blocks it signed itself.
    """
    system: list[str] = []
    out: list[dict[str, Any]] = []
    pending: list[str] = []
    counter = 0

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for m in messages:
        role = m.get("role")
        if role == "system":
            system.append(_text(m.get("content")))
        elif role == "tool":
            tool_id = m.get("tool_call_id") or (pending.pop(0) if pending else f"toolu_{counter}")
            if tool_id in pending:
                pending.remove(tool_id)
            add("user", [{"type": "tool_result", "tool_use_id": tool_id, "content": _text(m.get("content"))}])
        elif role == "assistant":
            blocks: list[dict[str, Any]] = []
            if _text(m.get("content")):
                blocks.append({"type": "text", "text": _text(m.get("content"))})
            for c in m.get("tool_calls") or ():
                tool_id = c.get("id") or f"toolu_{counter}"
                counter += 1
                pending.append(tool_id)
                fn = _call_fn(c)
                blocks.append({"type": "tool_use", "id": tool_id, "name": fn["name"], "input": _args_dict(fn.get("arguments"))})
            add("assistant", blocks or [{"type": "text", "text": "(no content)"}])
        else:
            add("user", [{"type": "text", "text": _text(m.get("content"))}])
    return "\n\n".join(s for s in system if s), out
