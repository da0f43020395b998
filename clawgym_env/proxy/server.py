"""The model-boundary HTTP server: one ASGI app on TCP and (optionally) a unix socket.

A plain ASGI callable rather than a framework router: the hot path is parse JSON -> neutral ->
backend -> pre-framed SSE bytes, with no middleware and no per-chunk objects. Sessions are
found by their secret key (``x-api-key`` or ``Authorization: Bearer``); a ``/s/<session_id>``
path prefix pins a session so a key from another episode is caught and refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import gc
import itertools
import operator
import os
import re
import socket
import time
import types
from pathlib import Path
from urllib.parse import parse_qsl
from collections.abc import Awaitable, Callable, Coroutine, Generator
from types import ModuleType
from typing import Any

import orjson
import uvicorn

from clawgym_env.capture.records import CallRecord
from clawgym_env.errors import ProxyError
from clawgym_env.proxy.backends.base import PolicyBackend
from clawgym_env.proxy.dialects import anthropic, gemini, openai_chat, openai_responses
from clawgym_env.proxy.dialects._common import BadRequest, ParsedRequest, Reply
from clawgym_env.proxy.egress import TargetKeepingProtocol, egress_target, proxy_key, refuse
from clawgym_env.proxy.session import CallFailed, ProxySession

__all__ = ["ProxyServer", "ServerState"]

DEFAULT_MAX_BODY = 32 * 1024 * 1024
HTTP_IMPL = "httptools"
"""uvicorn's HTTP/1.1 parser: httptools (C, llhttp) costs a fraction of h11's pure-Python CPU per call. The
server runs it as ``egress.TargetKeepingProtocol`` (the same parser, keeping CONNECT targets)."""

_ROUTES: dict[str, ModuleType] = {
    "/v1/messages": anthropic,
    "/v1/chat/completions": openai_chat,
    "/v1/responses": openai_responses,
}
_JSON = [(b"content-type", b"application/json")]
_SSE = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
_KEEPALIVE = b": keep-alive\n\n"  # an SSE comment: every SSE parser skips it


class ServerState(enum.Enum):
    NEW = "new"
    RUNNING = "running"
    STOPPED = "stopped"


class _Disconnected(Exception):
    pass


class _Server(uvicorn.Server):
    """uvicorn without signal capture: we are a library inside someone else's process."""

    @contextlib.contextmanager
    def capture_signals(self):  # type: ignore[override]
        yield


_FROZEN: list[bool] = []


def _freeze_heap() -> None:
    """Move what is alive at the first start (imports: torch, transformers, the harness registry...) out of the
    cyclic GC's reach: a full collection walked all of it while every in-flight call waited (~0.3 ms/call at
    64 streams). Once per process, after a collection, so no garbage is frozen with it."""
    if not _FROZEN:
        _FROZEN.append(True)
        gc.collect()
        gc.freeze()


def _guess_dialect(path: str, headers: dict[bytes, bytes]) -> ModuleType:
    if "/models/" in path and ":" in path or b"x-goog-api-key" in headers:
        return gemini
    if "messages" in path or b"anthropic-version" in headers or b"x-api-key" in headers:
        return anthropic
    return openai_chat


MAX_JSON_DEPTH = 256
"""Deepest JSON nesting a request body may have; refused before parsing (real bodies nest < 20)."""
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_STEP = bytes(2 if c in b"[{" else 0 for c in range(256))
_NOT_BRACKET = bytes(c for c in range(256) if c not in b"[]{}")


def _deeper_than_limit(text: bytes) -> bool:
    steps = text.translate(_STEP, _NOT_BRACKET)  # 2 per opening bracket, 0 per closing one
    for peeled in range(16):  # each pass removes the innermost pairs: real bodies end empty here, in C
        if len(steps) <= MAX_JSON_DEPTH - peeled:
            return False
        steps = steps.replace(b"\x02\x00", b"")
    # exact and linear (C-level iterators): depth after i steps = (sum of the first i) - i
    return 16 + max(map(operator.sub, itertools.accumulate(steps), itertools.count(1))) > MAX_JSON_DEPTH


def _too_deep(raw: bytes) -> bool:
    """True if ``raw`` nests deeper than MAX_JSON_DEPTH. Brackets alone first (they can only
    overestimate: a string may hold some); strings are stripped only when that says "deep"."""
    return _deeper_than_limit(raw) and _deeper_than_limit(_STRING.sub(b"", raw))


def load_body(raw: bytes) -> Any:
    """``orjson.loads(raw)``, refusing (CallFailed 400) a body that nests deeper than MAX_JSON_DEPTH or is not JSON.

    Parsing comes first: orjson (>= 3.9.15, pinned) stops at depth 1024 by itself. A parsed body that orjson
    encodes again nests < 255 levels (its encoder's limit), which settles a real body in one C pass (~8 us for
    44 kB) instead of the bracket scan of ``_too_deep`` (~27 us); whatever fails to parse or to encode gets
    that exact scan, so the answer is the scan's for every body.
    """
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        body, error = None, f"request body is not valid JSON: {exc}"
    else:
        try:
            orjson.dumps(body)
            return body
        except orjson.JSONEncodeError:
            error = ""
    if _too_deep(raw):
        raise CallFailed(400, f"request body nests JSON deeper than {MAX_JSON_DEPTH} levels")
    if error:
        raise CallFailed(400, error)
    return body


class ProxyServer:
    """Serves every open session's model calls; ``async with ProxyServer() as s`` starts and stops it."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, uds_path: Path | None = None,
                 *, max_body_bytes: int = DEFAULT_MAX_BODY, stream_keepalive_s: float = 10.0) -> None:
        self.host = host
        self.stream_keepalive_s = stream_keepalive_s
        """A streaming call whose policy is slower than this gets its SSE headers and a comment line
        every this many seconds, so harness clients with idle timeouts keep waiting."""
        self.port = port
        self.uds_path = Path(uds_path) if uds_path else None
        self.max_body_bytes = max_body_bytes
        self.state = ServerState.NEW
        self.refused: list[CallRecord] = []
        self._by_key: dict[str, ProxySession] = {}
        self._by_id: dict[str, ProxySession] = {}
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def url(self) -> str:
        if self.state is not ServerState.RUNNING:
            raise ProxyError("ProxyServer.url is only known after `await server.start()`")
        return f"http://{self.host}:{self.port}"

    async def start(self) -> ProxyServer:
        if self.state is not ServerState.NEW:
            raise ProxyError(f"ProxyServer.start(): server is {self.state.value}; create a new ProxyServer")
        tcp = socket.create_server((self.host, self.port))
        # accepted sockets inherit this; without it Nagle + delayed ACK add ~40 ms to every call
        tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        socks = [tcp]
        self.port = socks[0].getsockname()[1]
        if self.uds_path is not None:
            with contextlib.suppress(FileNotFoundError):
                self.uds_path.unlink()
            self.uds_path.parent.mkdir(parents=True, exist_ok=True)
            us = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            us.bind(str(self.uds_path))
            os.chmod(self.uds_path, 0o666)
            us.listen(1024)
            socks.append(us)
        for s in socks:
            s.setblocking(False)
        _freeze_heap()
        # proxy_headers off: no X-Forwarded-* rewriting (nothing sits in front of us, and it cost a middleware hop per call)
        config = uvicorn.Config(self, http=TargetKeepingProtocol, log_level="warning", access_log=False, lifespan="off",
                                proxy_headers=False,
                                timeout_graceful_shutdown=2, timeout_keep_alive=30, backlog=2048)
        self._server = _Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=socks), name="clawgym-proxy")
        while not self._server.started:
            if self._task.done():
                self._task.result()
                raise ProxyError("proxy server exited during startup")
            await asyncio.sleep(0.005)
        self.state = ServerState.RUNNING
        return self

    async def stop(self) -> None:
        """Stop serving and close every session's capture; idempotent."""
        if self.state is ServerState.STOPPED:
            return
        self.state = ServerState.STOPPED
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            with contextlib.suppress(Exception):
                await self._task
        for sess in list(self._by_id.values()):
            sess.close()
        self._by_id.clear()
        self._by_key.clear()
        if self.uds_path is not None:
            with contextlib.suppress(FileNotFoundError):
                self.uds_path.unlink()

    async def __aenter__(self) -> ProxyServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- sessions ----------------------------------------------------------------------------
    def open_session(self, backend: PolicyBackend, *, session_id: str | None = None,
                     capture_path: Path | None = None, max_calls: int | None = None,
                     sampling: dict[str, Any] | None = None, model_name: str = "policy",
                     api_key: str | None = None) -> ProxySession:
        """Start serving one episode; the harness authenticates with ``session.api_key``.

        ``api_key`` fixes the key (manual use); by default each session gets a fresh secret.
        """
        if session_id is not None and session_id in self._by_id:
            raise ProxyError(f"open_session(session_id={session_id!r}): already open; close it or pick another id")
        if api_key is not None and api_key in self._by_key:
            raise ProxyError("open_session(api_key=...): another open session uses this key; keys must be unique")
        sess = ProxySession(backend, session_id=session_id, capture_path=capture_path, max_calls=max_calls,
                            sampling=sampling, model_name=model_name)
        if api_key is not None:
            sess.api_key = api_key
        self._by_id[sess.session_id] = sess
        self._by_key[sess.api_key] = sess
        return sess

    async def close_session(self, session_id: str) -> list[CallRecord]:
        """Stop serving the episode, sync its capture and return its calls."""
        sess = self._by_id.pop(session_id, None)
        if sess is None:
            raise ProxyError(f"close_session({session_id!r}): no such open session")
        self._by_key.pop(sess.api_key, None)
        for _ in range(200):  # let in-flight calls of this session finish recording (<= ~2 s)
            if sess._next_index == len(sess._calls):
                break
            await asyncio.sleep(0.01)
        return await asyncio.to_thread(sess.close)

    def session(self, session_id: str) -> ProxySession:
        try:
            return self._by_id[session_id]
        except KeyError:
            raise ProxyError(f"no open session {session_id!r}") from None

    @property
    def sessions(self) -> list[ProxySession]:
        return list(self._by_id.values())

    # -- ASGI --------------------------------------------------------------------------------
    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        t0 = time.perf_counter()
        started_at = time.time()
        headers = dict(scope["headers"])
        method = scope["method"]
        target, path = egress_target(method, scope["path"])
        if target is not None:  # CONNECT / absolute URL elsewhere: a harness reaching past the proxy
            return await self._refuse_egress(send, headers, method, target, started_at)
        pinned: str | None = None
        if path.startswith("/s/"):
            _, _, rest = path.partition("/s/")
            pinned, _, tail = rest.partition("/")
            path = "/" + tail
        if path in ("/health", "/healthz"):
            return await _send_json(send, 200, {"ok": True, "sessions": len(self._by_id)})
        if path == "/v1/models" and method == "GET":
            return await _send_json(send, 200, self._models(headers))
        count_tokens = path == "/v1/messages/count_tokens"
        dialect = anthropic if count_tokens else _ROUTES.get(path)
        stream: bool | None = None  # set by the path, not the body (Gemini)
        gemini_route = gemini.route(path) if dialect is None else None
        if gemini_route is not None:
            dialect, stream = gemini, gemini.METHODS[gemini_route[1]]
            count_tokens = stream is None
        if dialect is None or method != "POST":
            d = dialect or _guess_dialect(path, headers)
            status = 405 if dialect is not None else 404
            return await _send_json(send, status, d.error_body(status, f"{method} {path}: no such endpoint here"))
        sess, why = self._authenticate(headers, pinned, scope.get("query_string", b""))
        if sess is None:
            self._refuse(pinned, dialect, path, started_at, why)
            return await _send_json(send, 401, dialect.error_body(401, why))
        try:
            body = await self._read_json(receive, headers)
        except _Disconnected:
            return
        except CallFailed as exc:
            return await _send_json(send, exc.status, dialect.error_body(exc.status, exc.message))
        if count_tokens:
            return await self._count_tokens(send, sess, dialect, body)
        if gemini_route is not None:
            body = {**body, "model": gemini_route[0], "stream": bool(stream)}
        await self._serve_call(send, receive, sess, dialect, path, body, started_at, t0)

    def _models(self, headers: dict[bytes, bytes]) -> dict[str, Any]:
        sess, _ = self._authenticate(headers, None)
        names = [sess.model_name] if sess else sorted({s.model_name for s in self._by_id.values()} or {"policy"})
        data = [{"id": n, "object": "model", "type": "model", "display_name": n, "created": 0,
                 "created_at": "1970-01-01T00:00:00Z", "owned_by": "clawgym"} for n in names]
        return {"object": "list", "data": data, "has_more": False, "first_id": names[0], "last_id": names[-1]}

    def _authenticate(self, headers: dict[bytes, bytes], pinned: str | None,
                      query: bytes = b"") -> tuple[ProxySession | None, str]:
        key = headers.get(b"x-api-key") or headers.get(b"api-key") or headers.get(b"x-goog-api-key")
        if key is None and b"key=" in query:  # Gemini API: ?key=<key>
            key = next((v.encode() for k, v in parse_qsl(query.decode("latin-1")) if k == "key"), None)
        if key is None:
            auth = headers.get(b"authorization", b"")
            if auth[:7].lower() == b"bearer ":
                key = auth[7:].strip()
        if not key:
            return None, "missing API key: send x-api-key or Authorization: Bearer <session key>"
        sess = self._by_key.get(key.decode("latin-1"))
        if sess is None:
            return None, "invalid API key: not the key of any open session"
        if pinned is not None and sess.session_id != pinned:
            return None, f"API key belongs to another session than {pinned!r}"
        return sess, ""

    def _refuse(self, pinned: str | None, dialect: ModuleType, path: str, started_at: float, why: str) -> None:
        rec = CallRecord.trusted({"session_id": pinned or "", "call_index": -1, "dialect": dialect.NAME, "path": path,
                                  "started_at": started_at, "status": 401, "error": f"refused: {why}",
                                  "finish_reason": "error", "token_source": "none"})
        self.refused.append(rec)
        if pinned in self._by_id:
            self._by_id[pinned].refused.append(rec)

    async def _refuse_egress(self, send: Any, headers: dict[bytes, bytes], method: str, target: str,
                             started_at: float) -> None:
        """403, recorded on the episode whose key came as the proxy credentials (else on the server)."""
        key = proxy_key(headers)
        sess = self._by_key.get(key) if key else None
        await refuse(send, sess.egress if sess else self.refused, sess.session_id if sess else "", method, target,
                     started_at)

    async def _read_json(self, receive: Any, headers: dict[bytes, bytes]) -> dict[str, Any]:
        ctype = headers.get(b"content-type", b"application/json").split(b";")[0].strip().lower()
        if ctype != b"application/json" and not ctype.endswith(b"+json"):
            raise CallFailed(415, f"content-type {ctype.decode('latin-1')!r} is not supported; send application/json")
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            raise CallFailed(413, f"request body of {int(declared)} bytes exceeds the limit of {self.max_body_bytes}")
        chunks: list[bytes] = []
        size = 0
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                raise _Disconnected
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise CallFailed(413, f"request body exceeds the limit of {self.max_body_bytes} bytes")
            chunks.append(chunk)
            if not msg.get("more_body", False):
                break
        body = load_body(b"".join(chunks))
        if not isinstance(body, dict):
            raise CallFailed(400, "request body must be a JSON object")
        return body

    async def _count_tokens(self, send: Any, sess: ProxySession, dialect: ModuleType, body: dict[str, Any]) -> None:
        """Anthropic ``count_tokens`` and Gemini ``countTokens``: no model call, not recorded."""
        try:
            parsed = dialect.parse_request(body, sess.ids)
        except BadRequest as exc:
            return await _send_json(send, 400, dialect.error_body(400, str(exc)))
        tok = sess.backend.tokenizer
        if tok is not None and getattr(tok, "chat_template", None):
            try:
                text = tok.apply_chat_template(parsed.messages, tools=parsed.tools or None, tokenize=False)
            except Exception as exc:  # the template rejects these messages
                return await _send_json(send, 400, dialect.error_body(400, f"chat template failed: {exc}"))
            n = len(tok(text, add_special_tokens=False)["input_ids"])
        else:  # message-level backend: an estimate (~4 bytes per token)
            n = len(orjson.dumps(parsed.messages)) // 4 + len(orjson.dumps(parsed.tools)) // 4
        await _send_json(send, 200, {"totalTokens": n} if dialect is gemini else {"input_tokens": n})

    async def _serve_call(self, send: Any, receive: Any, sess: ProxySession, dialect: ModuleType, path: str,
                          body: dict[str, Any], started_at: float, t0: float) -> None:
        rec: dict[str, Any] = {"session_id": sess.session_id, "call_index": sess.next_index(),
                               "dialect": dialect.NAME, "path": path, "started_at": started_at,
                               "stream": bool(body.get("stream")), "model": str(body.get("model", ""))}
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
                rec["meta"] = {"system_hash": digest}
            async def keepalive() -> None:  # a slow policy: open the stream, keep it from idling out
                if not opened:
                    opened.append(True)
                    await send({"type": "http.response.start", "status": 200, "headers": _SSE})
                # google-genai parses every non-blank line as JSON, an SSE comment too: it gets a blank line
                await send({"type": "http.response.body", "body": b"\n" if dialect is gemini else _KEEPALIVE, "more_body": True})

            extra = (parsed.include_usage,) if dialect is openai_chat else ()
            streamed: list[Any] = []  # [LiveReply, text sent] once live text went out

            async def live(head: Reply, text: str) -> None:  # content text while the policy decodes
                if not streamed:
                    streamed[:] = [dialect.LiveReply(head, *extra), ""]
                    if not opened:
                        opened.append(True)
                        await send({"type": "http.response.start", "status": 200, "headers": _SSE})
                    await send({"type": "http.response.body", "body": streamed[0].start(), "more_body": True})
                streamed[1] += text
                await send({"type": "http.response.body", "body": streamed[0].text(text), "more_body": True})

            reply = await _until_disconnect(sess.complete(dialect, parsed, rec, body, live if parsed.stream else None),
                                            receive, self.stream_keepalive_s if parsed.stream else None,
                                            keepalive if parsed.stream else None)
            if streamed:
                if not (reply.message.get("content") or "").startswith(streamed[1]):  # see _live: should not happen
                    rec["meta"] = {**(rec.get("meta") or {}), "live_text_mismatch": True}
                await send({"type": "http.response.body", "body": streamed[0].finish(reply, streamed[1]), "more_body": False})
            elif parsed.stream:
                frames = b"".join(dialect.render_stream(reply, *extra))
                if not opened:  # the whole stream is ready: a content-length saves chunked framing
                    headers = [*_SSE, (b"content-length", str(len(frames)).encode())]
                    await send({"type": "http.response.start", "status": 200, "headers": headers})
                await send({"type": "http.response.body", "body": frames, "more_body": False})
            else:
                await _send_json(send, 200, dialect.render_response(reply))
        except CallFailed as exc:
            status = exc.status
            rec.update(status=status, error=exc.message, finish_reason="error")
            if opened:  # headers are out: the error travels as the dialect's stream error event
                await send({"type": "http.response.body", "body": dialect.stream_error(status, exc.message),
                            "more_body": False})
            else:
                await _send_json(send, status, dialect.error_body(status, exc.message))
        except _Disconnected:
            rec.update(status=499, error="client disconnected before the reply was sent", finish_reason="error")
        except Exception as exc:  # a proxy bug must still answer in the dialect's shape and be recorded
            status = 500
            msg = f"proxy internal error: {type(exc).__name__}: {exc}"
            rec.update(status=status, error=msg, finish_reason="error")
            with contextlib.suppress(Exception):
                if opened:
                    await send({"type": "http.response.body", "body": dialect.stream_error(status, msg),
                                "more_body": False})
                else:
                    await _send_json(send, status, dialect.error_body(status, msg))
        finally:
            rec.setdefault("status", status)
            rec["latency_s"] = time.perf_counter() - t0
            if rec.get("token_source") is None:
                rec["token_source"] = "none"
            sess.record(rec, parsed)


async def _until_disconnect(coro: Coroutine[Any, Any, Any], receive: Any, idle_s: float | None = None,
                            on_idle: Callable[[], Awaitable[None]] | None = None) -> Any:
    """Await ``coro`` unless the client hangs up first (then cancel it and raise _Disconnected).

    ``on_idle`` runs every ``idle_s`` seconds while waiting (SSE keep-alives). ``coro`` first runs
    right here up to its first suspension: a backend with the reply at hand (scripted, replay) is
    done then, with no task, no watcher, no timer and no loop turn.
    """
    try:
        pending = coro.send(None)
    except StopIteration as done:
        return done.value
    work = asyncio.ensure_future(_resume(coro, pending))
    watch = asyncio.ensure_future(receive())
    try:
        while True:
            done, _ = await asyncio.wait({work, watch}, timeout=idle_s, return_when=asyncio.FIRST_COMPLETED)
            if work in done:
                return work.result()
            if watch in done:
                if watch.result().get("type") == "http.disconnect":
                    work.cancel()
                    with contextlib.suppress(BaseException):
                        await work
                    raise _Disconnected
                watch = asyncio.ensure_future(receive())
            elif on_idle is not None:
                await on_idle()
    finally:
        if not watch.done():
            watch.cancel()
        if not work.done():
            work.cancel()


@types.coroutine
def _resume(coro: Coroutine[Any, Any, Any], pending: Any) -> Generator[Any, Any, Any]:
    """The rest of a coroutine that already ran to its first suspension (``pending``: the future it waits on),
    as an awaitable a Task can drive: each result or exception the task passes in goes on to ``coro``."""
    while True:
        try:
            sent = yield pending
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # the task's cancellation, or an exception thrown in
            try:
                pending = coro.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            try:
                pending = coro.send(sent)
            except StopIteration as done:
                return done.value


async def _send_json(send: Any, status: int, payload: dict[str, Any]) -> None:
    body = orjson.dumps(payload)
    await send({"type": "http.response.start", "status": status,
                "headers": [*_JSON, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
