"""One model call at the proxy, from its parsed body to the last byte of its reply and its record.

parse (dialect -> neutral) -> share the resent history -> ``ProxySession.complete`` -> the reply as
pre-framed SSE or JSON -> ``ProxySession.record``. Every failure still answers in the dialect's shape
and is recorded.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from typing import Any

from clawgym_env.proxy._asgi import SSE_HEADERS, Disconnected, send_json, until_disconnect
from clawgym_env.proxy.dialects import Dialect
from clawgym_env.proxy.dialects._common import BadRequest, ParsedRequest, Reply
from clawgym_env.proxy.session import CallFailed, ProxySession

__all__ = ["client_meta", "serve_call"]


_LINE_HEADER = b"x-claude-code-agent-id"
"""Claude Code names each subagent in this header (absent on the main conversation's calls): a per-line id,
kept apart from the client digest."""
_CLIENT_VALUES = (b"user-agent", b"x-claude-code-session-id")
"""Headers whose values join the client digest: the HTTP client, and the harness process's own session id."""


def client_meta(headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    """What a call's headers say about its sender, for telling the harness's calls from others (``tree/classify.py``):
    ``client``, a digest of the header names in the order sent, the user agent and the harness's session id header
    (one harness process sends the same on every call; curl, or another library, does not); ``agent_id``, Claude
    Code's subagent id; ``retry_count`` where the client numbers its retries (the Anthropic and OpenAI SDKs'
    ``x-stainless-retry-count``) and this is one."""
    h = hashlib.blake2b(digest_size=6)
    out: dict[str, Any] = {}
    for name, value in headers:
        if name == _LINE_HEADER:
            out["agent_id"] = value.decode("latin-1")
            continue
        h.update(name + b"\n")
        if name in _CLIENT_VALUES:
            h.update(value + b"\n")
        elif name == b"x-stainless-retry-count" and value.isdigit() and int(value) > 0:
            out["retry_count"] = int(value)
    out["client"] = h.hexdigest()
    return out


async def serve_call(
    send: Any,
    receive: Any,
    sess: ProxySession,
    dialect: Dialect,
    path: str,
    body: dict[str, Any],
    started_at: float,
    t0: float,
    keepalive_s: float,
    client: dict[str, Any] | None = None,
) -> None:
    """Answer one model call of ``sess`` and record it; ``keepalive_s``: see ``ProxyServer.stream_keepalive_s``;
    ``client``: ``client_meta`` of its headers, kept in the record's meta."""
    rec: dict[str, Any] = {
        "session_id": sess.session_id,
        "call_index": sess.next_index(),
        "dialect": dialect.NAME,
        "path": path,
        "started_at": started_at,
        "stream": bool(body.get("stream")),
        "model": str(body.get("model", "")),
    }
    if client:
        rec["meta"] = dict(client)
    status = 200
    opened: list[bool] = []  # non-empty once SSE headers went out (slow policy, keep-alive sent)
    parsed: ParsedRequest | None = None
    try:
        try:
            parsed = dialect.parse_request(body, sess.ids)
        except BadRequest as exc:
            raise CallFailed(400, str(exc)) from None
        sess.share(parsed)
        rec["messages"] = parsed.messages
        rec["tools"] = parsed.tools
        digest = sess.history.system_hash(parsed.messages)
        if digest is not None:  # which agent prompt this call ran under (subagents and side calls differ)
            rec["meta"] = {**(rec.get("meta") or {}), "system_hash": digest}

        async def keepalive() -> None:  # a slow policy: open the stream, keep it from idling out
            if not opened:
                opened.append(True)
                await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
            await send({"type": "http.response.body", "body": dialect.KEEPALIVE, "more_body": True})

        streamed: list[Any] = []  # [LiveReply, text sent] once live text went out

        async def live(head: Reply, text: str) -> None:  # content text while the policy decodes
            if not streamed:
                streamed[:] = [dialect.LiveReply(head, parsed.include_usage), ""]
                if not opened:
                    opened.append(True)
                    await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
                await send({"type": "http.response.body", "body": streamed[0].start(), "more_body": True})
            streamed[1] += text
            await send({"type": "http.response.body", "body": streamed[0].text(text), "more_body": True})

        reply = await until_disconnect(
            sess.complete(dialect, parsed, rec, body, live if parsed.stream else None),
            receive,
            keepalive_s if parsed.stream else None,
            keepalive if parsed.stream else None,
        )
        if streamed:
            if not (reply.message.get("content") or "").startswith(streamed[1]):  # see _live: should not happen
                rec["meta"] = {**(rec.get("meta") or {}), "live_text_mismatch": True}
            await send({"type": "http.response.body", "body": streamed[0].finish(reply, streamed[1]), "more_body": False})
        elif parsed.stream:
            frames = b"".join(dialect.render_stream(reply, parsed.include_usage))
            if not opened:  # the whole stream is ready: a content-length saves chunked framing
                headers = [*SSE_HEADERS, (b"content-length", str(len(frames)).encode())]
                await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": frames, "more_body": False})
        else:
            await send_json(send, 200, dialect.render_response(reply))
    except CallFailed as exc:
        status = exc.status
        rec.update(status=status, error=exc.message, finish_reason="error")
        if opened:  # headers are out: the error travels as the dialect's stream error event
            await send({"type": "http.response.body", "body": dialect.stream_error(status, exc.message), "more_body": False})
        else:
            await send_json(send, status, dialect.error_body(status, exc.message))
    except Disconnected:
        rec.update(status=499, error="client disconnected before the reply was sent", finish_reason="error")
    except Exception as exc:  # noqa: BLE001 - a proxy bug must still answer in the dialect's shape and be recorded
        status = 500
        msg = f"proxy internal error: {type(exc).__name__}: {exc}"
        rec.update(status=status, error=msg, finish_reason="error")
        with contextlib.suppress(Exception):
            if opened:
                await send({"type": "http.response.body", "body": dialect.stream_error(status, msg), "more_body": False})
            else:
                await send_json(send, status, dialect.error_body(status, msg))
    finally:
        rec.setdefault("status", status)
        rec["latency_s"] = time.perf_counter() - t0
        if rec.get("token_source") is None:
            rec["token_source"] = "none"
        sess.record(rec, parsed)
