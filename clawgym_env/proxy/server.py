"""The model-boundary HTTP server: one ASGI app on TCP and (optionally) a unix socket.

A plain ASGI callable rather than a framework router: the hot path is parse JSON -> neutral ->
backend -> pre-framed SSE bytes, with no middleware and no per-chunk objects. Sessions are
found by their secret key (``x-api-key`` or ``Authorization: Bearer``); a ``/s/<session_id>``
path prefix pins a session so a key from another episode is caught and refused.

Here: lifecycle, sessions and routing. A model call itself is ``_call.serve_call``; reading the
body, ``_json_body``; the shared ASGI helpers, ``_asgi``.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import gc
import os
import socket
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import orjson
import uvicorn

from clawgym_env.capture.records import CallRecord
from clawgym_env.errors import ProxyError
from clawgym_env.proxy._asgi import Disconnected, send_json
from clawgym_env.proxy._call import client_meta, serve_call
from clawgym_env.proxy._json_body import read_json
from clawgym_env.proxy.backends.base import PolicyBackend
from clawgym_env.proxy.dialects import Dialect, anthropic, gemini, openai_chat, openai_responses
from clawgym_env.proxy.dialects._common import BadRequest
from clawgym_env.proxy.egress import TargetKeepingProtocol, egress_target, proxy_key, refuse
from clawgym_env.proxy.session import CallFailed, ProxySession

__all__ = ["ProxyServer", "ServerState"]

DEFAULT_MAX_BODY = 32 * 1024 * 1024
HTTP_IMPL = "httptools"
"""uvicorn's HTTP/1.1 parser: httptools (C, llhttp) costs a fraction of h11's pure-Python CPU per call. The
server runs it as ``egress.TargetKeepingProtocol`` (the same parser, keeping CONNECT targets)."""

_ROUTES: dict[str, Dialect] = {
    "/v1/messages": anthropic,
    "/v1/chat/completions": openai_chat,
    "/v1/responses": openai_responses,
}


class ServerState(enum.Enum):
    NEW = "new"
    RUNNING = "running"
    STOPPED = "stopped"


class _Server(uvicorn.Server):
    """uvicorn without signal capture: we are a library inside someone else's process."""

    @contextlib.contextmanager
    def capture_signals(self):
        yield


_FROZEN: list[bool] = []

GC_YOUNG_THRESHOLD = 7000
"""Allocations between young collections while a proxy serves (CPython's default is 700). Each young
collection walks every young object still alive, and 64 in-flight calls keep a few thousand alive, so at
700 the walk repeated every ~20 calls (bench/proxy.py: 145 collections plus 12 older ones for 2,760 calls);
10x fewer collections walk those objects 10x less often. Only unreachable cycles wait longer to be freed."""


def _tune_gc() -> None:
    """Once per process, at the first start: move what is alive then (imports: torch, transformers, the harness
    registry...) out of the cyclic GC's reach, after a collection so no garbage is frozen with it (a full
    collection walked all of it while every in-flight call waited: ~0.3 ms/call at 64 streams), and raise the
    young threshold to GC_YOUNG_THRESHOLD (never lowering one the host process set higher)."""
    if not _FROZEN:
        _FROZEN.append(True)
        gc.collect()
        gc.freeze()
        young, *older = gc.get_threshold()
        if 0 < young < GC_YOUNG_THRESHOLD:  # 0: the host disabled automatic collection; leave it so
            gc.set_threshold(GC_YOUNG_THRESHOLD, *older)


def _guess_dialect(path: str, headers: dict[bytes, bytes]) -> Dialect:
    if "/models/" in path and ":" in path or b"x-goog-api-key" in headers:
        return gemini
    if "messages" in path or b"anthropic-version" in headers or b"x-api-key" in headers:
        return anthropic
    return openai_chat


class ProxyServer:
    """Serves every open session's model calls; ``async with ProxyServer() as s`` starts and stops it."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        uds_path: Path | None = None,
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY,
        stream_keepalive_s: float = 10.0,
    ) -> None:
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
        self._by_egress: dict[str, ProxySession] = {}
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
        _tune_gc()
        # proxy_headers off: no X-Forwarded-* rewriting (nothing sits in front of us, and it cost a middleware hop per call)
        config = uvicorn.Config(
            self,
            http=TargetKeepingProtocol,
            log_level="warning",
            access_log=False,
            lifespan="off",
            proxy_headers=False,
            timeout_graceful_shutdown=2,
            timeout_keep_alive=30,
            backlog=2048,
        )
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
        self._by_egress.clear()
        if self.uds_path is not None:
            with contextlib.suppress(FileNotFoundError):
                self.uds_path.unlink()

    async def __aenter__(self) -> ProxyServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- sessions ----------------------------------------------------------------------------
    def open_session(
        self,
        backend: PolicyBackend,
        *,
        session_id: str | None = None,
        capture_path: Path | None = None,
        max_calls: int | None = None,
        sampling: dict[str, Any] | None = None,
        model_name: str = "policy",
        api_key: str | None = None,
    ) -> ProxySession:
        """Start serving one episode; the harness authenticates with ``session.api_key``.

        ``api_key`` fixes the key (manual use); by default each session gets a fresh secret.
        """
        if session_id is not None and session_id in self._by_id:
            raise ProxyError(f"open_session(session_id={session_id!r}): already open; close it or pick another id")
        if api_key is not None and api_key in self._by_key:
            raise ProxyError("open_session(api_key=...): another open session uses this key; keys must be unique")
        sess = ProxySession(
            backend, session_id=session_id, capture_path=capture_path, max_calls=max_calls, sampling=sampling, model_name=model_name
        )
        if api_key is not None:
            sess.api_key = api_key
        self._by_id[sess.session_id] = sess
        self._by_key[sess.api_key] = sess
        self._by_egress[sess.egress_key] = sess
        return sess

    async def close_session(self, session_id: str) -> list[CallRecord]:
        """Stop serving the episode, sync its capture and return its calls."""
        sess = self._by_id.pop(session_id, None)
        if sess is None:
            raise ProxyError(f"close_session({session_id!r}): no such open session")
        self._by_key.pop(sess.api_key, None)
        self._by_egress.pop(sess.egress_key, None)
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
            return await send_json(send, 200, {"ok": True, "sessions": len(self._by_id)})
        if path == "/v1/models" and method == "GET":
            return await send_json(send, 200, self._models(headers))
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
            return await send_json(send, status, d.error_body(status, f"{method} {path}: no such endpoint here"))
        sess, why = self._authenticate(headers, pinned, scope.get("query_string", b""))
        if sess is None:
            self._refuse(pinned, dialect, path, started_at, why)
            return await send_json(send, 401, dialect.error_body(401, why))
        try:
            body = await read_json(receive, headers, self.max_body_bytes)
        except Disconnected:
            return
        except CallFailed as exc:
            return await send_json(send, exc.status, dialect.error_body(exc.status, exc.message))
        if count_tokens:
            return await self._count_tokens(send, sess, dialect, body)
        if gemini_route is not None:
            body = {**body, "model": gemini_route[0], "stream": bool(stream)}
        await serve_call(send, receive, sess, dialect, path, body, started_at, t0, self.stream_keepalive_s, client_meta(scope["headers"]))

    def _models(self, headers: dict[bytes, bytes]) -> dict[str, Any]:
        sess, _ = self._authenticate(headers, None)
        names = [sess.model_name] if sess else sorted({s.model_name for s in self._by_id.values()} or {"policy"})
        data = [
            {
                "id": n,
                "object": "model",
                "type": "model",
                "display_name": n,
                "created": 0,
                "created_at": "1970-01-01T00:00:00Z",
                "owned_by": "clawgym",
            }
            for n in names
        ]
        return {"object": "list", "data": data, "has_more": False, "first_id": names[0], "last_id": names[-1]}

    def _authenticate(self, headers: dict[bytes, bytes], pinned: str | None, query: bytes = b"") -> tuple[ProxySession | None, str]:
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

    def _refuse(self, pinned: str | None, dialect: Dialect, path: str, started_at: float, why: str) -> None:
        rec = CallRecord.trusted(
            {
                "session_id": pinned or "",
                "call_index": -1,
                "dialect": dialect.NAME,
                "path": path,
                "started_at": started_at,
                "status": 401,
                "error": f"refused: {why}",
                "finish_reason": "error",
                "token_source": "none",
            }
        )
        self.refused.append(rec)
        if pinned in self._by_id:
            self._by_id[pinned].refused.append(rec)

    async def _refuse_egress(self, send: Any, headers: dict[bytes, bytes], method: str, target: str, started_at: float) -> None:
        """403, recorded on the episode whose egress key came as the proxy credentials (else on the server)."""
        key = proxy_key(headers)
        sess = self._by_egress.get(key) if key else None
        await refuse(send, sess.egress if sess else self.refused, sess.session_id if sess else "", method, target, started_at)

    async def _count_tokens(self, send: Any, sess: ProxySession, dialect: Dialect, body: dict[str, Any]) -> None:
        """Anthropic ``count_tokens`` and Gemini ``countTokens``: no model call, not recorded."""
        try:
            parsed = dialect.parse_request(body, sess.ids)
        except BadRequest as exc:
            return await send_json(send, 400, dialect.error_body(400, str(exc)))
        tok = sess.backend.tokenizer
        if tok is not None and getattr(tok, "chat_template", None):
            try:
                text = tok.apply_chat_template(parsed.messages, tools=parsed.tools or None, tokenize=False)
            except Exception as exc:  # noqa: BLE001 - the template rejects these messages
                return await send_json(send, 400, dialect.error_body(400, f"chat template failed: {exc}"))
            n = len(tok(text, add_special_tokens=False)["input_ids"])
        else:  # message-level backend: an estimate (~4 bytes per token)
            n = len(orjson.dumps(parsed.messages)) // 4 + len(orjson.dumps(parsed.tools)) // 4
        await send_json(send, 200, {"totalTokens": n} if dialect is gemini else {"input_tokens": n})
