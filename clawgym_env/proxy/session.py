"""One episode at the proxy: its secret key, tool-id map, TITO prefix index, capture and calls."""

from __future__ import annotations

import asyncio
import enum
import os
import secrets
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson

from clawgym_env.capture.delta import LineHints
from clawgym_env.capture.records import CallRecord
from clawgym_env.capture.store import CaptureWriter
from clawgym_env.errors import PromptTooLong, ProxyError
from clawgym_env.proxy._history import SharedHistory
from clawgym_env.proxy._live import LiveText, opens_reasoning
from clawgym_env.proxy._neutral import ToolIdMap, parse_arguments
from clawgym_env.proxy._output import parse_model_output
from clawgym_env.proxy._tito import PromptBuilder
from clawgym_env.proxy.backends.base import Completion, CompletionRequest, PolicyBackend, StreamingBackend
from clawgym_env.proxy.dialects import Dialect
from clawgym_env.proxy.dialects._common import ParsedRequest, Reply

__all__ = ["CallFailed", "LiveSink", "ProxySession", "SessionState"]

LiveSink = Callable[[Reply, str], Awaitable[None]]
"""Receives a streamed call's content text as it settles, with the reply's head (id, model, prompt size)."""

_SAMPLING_KEYS = ("max_tokens", "temperature", "top_p", "stop", "seed")


class SessionState(enum.Enum):
    OPEN = "open"
    CLOSED = "closed"


class CallFailed(Exception):
    """A call the proxy answers with an error status (recorded, never raised to the harness)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class ProxySession:
    """Serves one episode's model calls with one backend and records each of them.

    ``sampling`` (max_tokens, temperature, top_p, stop, seed) overrides what the harness asks
    for, so a trainer controls the rollout distribution whatever the harness sends.
    """

    def __init__(
        self,
        backend: PolicyBackend,
        *,
        session_id: str | None = None,
        capture_path: Path | None = None,
        max_calls: int | None = None,
        sampling: dict[str, Any] | None = None,
        model_name: str = "policy",
        fsync: bool = True,
    ) -> None:
        unknown = set(sampling or {}) - set(_SAMPLING_KEYS)
        if unknown:
            raise ProxyError(f"open_session(sampling=...): unknown keys {sorted(unknown)}; use {list(_SAMPLING_KEYS)}")
        self.backend = backend
        self.session_id = session_id or secrets.token_hex(8)
        self.api_key = "sk-clawgym-" + secrets.token_urlsafe(24)
        self.egress_key = "egress-" + secrets.token_urlsafe(24)
        """Tags the harness's attempts to reach past the proxy (``egress_env``) as this episode's; it opens no model
        call, so the HTTP(S)_PROXY variables every process of the sandbox sees do not hand out ``api_key``."""
        self.max_calls = max_calls
        self.sampling = dict(sampling or {})
        self.model_name = model_name
        self.capture_path = Path(capture_path) if capture_path else None
        self.state = SessionState.OPEN
        self.refused: list[CallRecord] = []
        self.egress: list[CallRecord] = []
        """Attempts to reach anything but the proxy (``clawgym_env.proxy.egress``), refused with 403."""
        self.ids = ToolIdMap()
        self.history = SharedHistory()
        self._calls: list[CallRecord] = []
        self._next_index = 0
        self._over_limit = False
        self._writer = CaptureWriter(self.capture_path, fsync=fsync) if self.capture_path else None
        tok = backend.tokenizer if backend.TOKEN_LEVEL else None
        self.prompts: PromptBuilder | None = PromptBuilder(tok) if tok is not None else None

    # -- public view -------------------------------------------------------------------------
    @property
    def calls(self) -> list[CallRecord]:
        """Finished calls (answered or failed), in arrival order."""
        return sorted(self._calls, key=lambda r: r.call_index)

    @property
    def over_limit(self) -> bool:
        """True once the harness asked for more than ``max_calls`` calls."""
        return self._over_limit

    @property
    def splice_hit_rate(self) -> float:
        """Share of prompt tokens reused verbatim from earlier calls (0 for message-level backends)."""
        return self.prompts.hit_rate if self.prompts else 0.0

    # -- serving -----------------------------------------------------------------------------
    def next_index(self) -> int:
        i = self._next_index
        self._next_index += 1
        return i

    def share(self, parsed: ParsedRequest) -> None:
        """Swap in the last call's equal message/tool objects and attach their JSON (``SharedHistory``)."""
        parsed.messages, parsed.tools, parsed.messages_json, parsed.tools_json, parsed.json_size = self.history.share(
            parsed.messages, parsed.tools
        )

    def _sampling(self, parsed: ParsedRequest) -> dict[str, Any]:
        s: dict[str, Any] = {
            "max_tokens": parsed.max_tokens or 1024,
            "temperature": parsed.temperature,
            "top_p": parsed.top_p,
            "stop": parsed.stop,
            "seed": parsed.seed,
        }
        s.update(self.sampling)
        if s["temperature"] is None:
            s["temperature"] = 1.0
        if s["top_p"] is None:
            s["top_p"] = 1.0
        return s

    async def complete(
        self, dialect: Dialect, parsed: ParsedRequest, rec: dict[str, Any], raw: dict[str, Any], live: LiveSink | None = None
    ) -> Reply:
        """Run one call through the backend; fills ``rec`` (the record in progress) as it goes.

        With ``live`` and a streaming backend, content text reaches ``live`` while the policy decodes
        (``_live.LiveText`` says which); the reply and the record are those of an unstreamed call.
        """
        if self.state is SessionState.CLOSED:
            raise CallFailed(401, f"session {self.session_id} is closed")
        if self.max_calls is not None and rec["call_index"] >= self.max_calls:
            self._over_limit = True
            raise CallFailed(400, f"call budget exhausted: this episode allows {self.max_calls} model calls")
        s = self._sampling(parsed)
        prompt_ids: list[int] | None = None
        reused = 0
        if self.prompts is not None:
            try:
                prompt_ids, reused = self.prompts.build(parsed.messages, parsed.tools)
                parsed.prompt_hint = self.prompts.last_hint
            except Exception as exc:  # the template rejects these messages: the request's content, as count_tokens says
                raise CallFailed(400, f"rendering the chat template failed: {exc}") from exc
        rec["prompt_ids"] = prompt_ids
        rec["reused_prompt_tokens"] = reused
        request = CompletionRequest(
            session_id=self.session_id,
            call_index=rec["call_index"],
            prompt_ids=prompt_ids,
            messages=parsed.messages,
            tools=parsed.tools,
            max_tokens=int(s["max_tokens"]),
            temperature=float(s["temperature"]),
            top_p=float(s["top_p"]),
            stop=list(s["stop"] or ()),
            seed=s["seed"],
            dialect=dialect.NAME,
            raw=raw,
        )
        head = Reply(
            message={},
            finish_reason="",
            model=parsed.model or self.model_name,
            prompt_tokens=len(prompt_ids or ()),
            completion_tokens=0,
            response_id=dialect.RESPONSE_ID_PREFIX + os.urandom(12).hex(),
            created=int(time.time()),
        )
        t0 = time.perf_counter()
        try:
            if live is not None and isinstance(self.backend, StreamingBackend):
                completion = await self._stream(self.backend, request, head, live)
            else:
                completion = await self.backend.handle(request)
        except asyncio.CancelledError:
            raise
        except PromptTooLong as exc:  # the policy's own history outgrew its context: a request error, as APIs answer it
            rec["backend_s"] = time.perf_counter() - t0
            raise CallFailed(400, str(exc)) from exc
        except Exception as exc:
            rec["backend_s"] = time.perf_counter() - t0
            status = 529 if "overload" in type(exc).__name__.lower() else 500
            raise CallFailed(status, f"policy backend {self.backend.name!r} failed: {type(exc).__name__}: {exc}") from exc
        rec["backend_s"] = time.perf_counter() - t0
        return self._reply(dialect, parsed, completion, rec, prompt_ids, head)

    async def _stream(self, backend: StreamingBackend, request: CompletionRequest, head: Reply, live: LiveSink) -> Completion:
        tok = backend.tokenizer
        tail = tok.decode((request.prompt_ids or [])[-16:]) if tok is not None else ""
        text = LiveText(enabled=not opens_reasoning(tail))
        async for item in backend.stream(request):
            if isinstance(item, Completion):
                return item
            if piece := text.feed(item.text):
                await live(head, piece)
        raise CallFailed(500, f"policy backend {backend.name!r} ended its stream without a completion")

    def _reply(
        self, dialect: Dialect, parsed: ParsedRequest, c: Completion, rec: dict[str, Any], prompt_ids: list[int] | None, head: Reply
    ) -> Reply:
        if c.structured is not None:
            raw_msg = c.structured
            calls_in = [
                {"name": fn["name"], "arguments": parse_arguments(fn.get("arguments"))}
                for fn in (t.get("function", t) for t in raw_msg.get("tool_calls") or ())
            ]
            out: dict[str, Any] = {
                "content": raw_msg.get("content") or "",
                "reasoning_content": raw_msg.get("reasoning_content") or "",
                "tool_calls": calls_in,
            }
            text = c.text or ""
        else:
            decoded = c.text
            if decoded is None:
                tok = self.backend.tokenizer
                if tok is None or c.completion_ids is None:
                    raise CallFailed(500, f"policy backend {self.backend.name!r} returned neither text nor ids")
                decoded = tok.decode(c.completion_ids, skip_special_tokens=True)
            text = decoded
            out = parse_model_output(text)
        message: dict[str, Any] = {"role": "assistant", "content": out["content"]}
        if out["reasoning_content"]:
            message["reasoning_content"] = out["reasoning_content"]
        if out["tool_calls"]:
            message["tool_calls"] = [
                {
                    "id": self.ids.issue(dialect.TOOL_ID_PREFIX),
                    "type": "function",
                    "function": {"name": t["name"], "arguments": t["arguments"]},
                }
                for t in out["tool_calls"]
            ]
        finish = c.finish_reason
        if message.get("tool_calls") and finish == "stop":
            finish = "tool_calls"
        if self.prompts is not None and prompt_ids is not None and c.completion_ids:
            self.prompts.remember(parsed.messages, parsed.tools, prompt_ids, list(c.completion_ids), message)
        n_prompt = len(prompt_ids) if prompt_ids is not None else c.usage.get("prompt_tokens") or _estimate(parsed)
        n_out = len(c.completion_ids) if c.completion_ids is not None else c.usage.get("completion_tokens", len(text) // 4)
        source = c.token_source or ("sampled" if c.completion_ids is not None else "none")
        rec.update(
            completion_ids=c.completion_ids,
            logprobs=c.logprobs,
            completion_text=text,
            response=message,
            finish_reason=finish,
            token_source=source,
            policy_version=c.policy_version,
        )
        if c.meta:
            rec["meta"] = {**(rec.get("meta") or {}), **c.meta}
        if c.routing is not None:
            rec["routing"] = c.routing
        return Reply(
            message=message,
            finish_reason=finish,
            model=head.model,
            prompt_tokens=n_prompt,
            completion_tokens=n_out,
            response_id=head.response_id,
            created=head.created,
        )

    def record(self, rec: dict[str, Any], parsed: ParsedRequest | None = None) -> CallRecord:
        """Store a finished call in memory and append it to the capture file (fsynced within ``FSYNC_INTERVAL_S``).

        ``parsed`` (the call's shared request) lends its messages' and tools' JSON to the capture line, and where
        its prompt's ids came from (the line stores only what earlier lines do not hold).
        """
        record = CallRecord.trusted(rec)
        self._calls.append(record)
        if self._writer is not None and self.state is SessionState.OPEN:  # a call outliving close stays in memory
            hints = None
            if parsed is not None:
                shared = (
                    parsed.messages_json is not None
                    and parsed.tools_json is not None
                    and record.messages is parsed.messages
                    and record.tools is parsed.tools
                )
                hint = parsed.prompt_hint if record.prompt_ids is not None else None
                if shared or hint is not None:
                    hints = LineHints(parsed.messages_json, parsed.tools_json, hint) if shared else LineHints(prompt=hint)
            self._writer.write(record, hints)
            self._writer.sync_soon()
        return record

    def close(self) -> list[CallRecord]:
        """Stop serving, close the capture; idempotent. Returns the calls."""
        if self.state is not SessionState.CLOSED:
            self.state = SessionState.CLOSED
            if self._writer is not None:
                self._writer.close()
        return self.calls


def _estimate(parsed: ParsedRequest) -> int:
    """Prompt size for backends that report none (~4 bytes per token); harnesses budget context by it."""
    if parsed.messages_json is not None and parsed.tools_json is not None:
        return parsed.json_size // 4
    return (len(orjson.dumps(parsed.messages)) + len(orjson.dumps(parsed.tools))) // 4
