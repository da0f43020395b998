"""Network attempts beyond the model proxy: made visible, refused and reported per episode.

A sandbox's network namespace holds only loopback, so any other connection already fails. To
*see* those attempts (a harness phoning home: telemetry, update checks, login, a web fetch by the
agent), every harness runs with the proxy as its HTTP(S) proxy (``egress_env``): clients that honour
``HTTPS_PROXY``/``HTTP_PROXY`` (Node's undici with ``NODE_USE_ENV_PROXY``, reqwest, httpx, requests,
curl) send ``CONNECT host:443`` or an absolute-form request to the proxy instead of failing on DNS. The
proxy answers 403 and records the target on the episode, identified by the session key carried
as the proxy credentials. ``NO_PROXY`` keeps the model calls themselves direct; an absolute-form
request for the proxy's own loopback address is served as a normal call.

Clients that ignore the proxy variables still fail closed (no route, no DNS) but are not recorded.
"""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import urlsplit

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from clawgym_env.capture.records import CallRecord

__all__ = ["LOOPBACK", "TargetKeepingProtocol", "egress_env", "egress_target", "proxy_key", "refuse"]

LOOPBACK = ("127.0.0.1", "localhost", "::1")
_PROXY_USER = "clawgym"


def egress_env(egress_key: str, port: int) -> dict[str, str]:
    """Environment that routes a harness's non-proxy HTTP(S) traffic to the proxy, tagged with the session's
    ``egress_key`` (never its model key: every process of the sandbox sees these variables)."""
    url = f"http://{_PROXY_USER}:{egress_key}@127.0.0.1:{port}"
    no_proxy = ",".join(LOOPBACK)
    env = {"NODE_USE_ENV_PROXY": "1"}
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"):
        env[name] = env[name.lower()] = url
    env["NO_PROXY"] = env["no_proxy"] = no_proxy
    return env


def egress_target(method: str, path: str) -> tuple[str | None, str]:
    """(target, path): ``target`` is the outside address a request tries to reach (None for an ordinary call);
    ``path`` is the request path to serve, rewritten from an absolute-form URL for the proxy itself."""
    if method == "CONNECT":
        return path, path
    if path.startswith("/"):
        return None, path
    url = urlsplit(path)
    if url.scheme in ("http", "https") and url.hostname in LOOPBACK:
        return None, url.path or "/"
    return f"{url.hostname or path}:{url.port or (443 if url.scheme == 'https' else 80)}", path


def proxy_key(headers: dict[bytes, bytes]) -> str | None:
    """The session key in ``Proxy-Authorization: Basic base64(clawgym:<key>)``, if any."""
    auth = headers.get(b"proxy-authorization", b"")
    if auth[:6].lower() != b"basic ":
        return None
    try:
        user, _, key = base64.b64decode(auth[6:].strip()).decode("latin-1").partition(":")
    except ValueError:
        return None
    return key if user == _PROXY_USER and key else None


_REFUSED = b"egress refused by ClawGym: only the model proxy is reachable from this sandbox\n"


async def refuse(send: Any, into: list[CallRecord], session_id: str, method: str, target: str, started_at: float) -> None:
    """Answer an egress attempt with 403 (ASGI ``send``) and append its record to ``into``."""
    into.append(
        CallRecord.trusted(
            {
                "session_id": session_id,
                "call_index": -1,
                "dialect": "egress",
                "path": f"{method} {target}",
                "started_at": started_at,
                "status": 403,
                "error": f"egress refused: {method} {target}",
                "finish_reason": "error",
                "token_source": "none",
            }
        )
    )
    await send(
        {
            "type": "http.response.start",
            "status": 403,
            "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(_REFUSED)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": _REFUSED})


class TargetKeepingProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol that keeps the request target of CONNECT and absolute-form requests
    in ``scope["path"]``: httptools cannot parse ``host:443`` (it would answer 400) and drops the host of
    ``http://host/x``, which is exactly what ``egress_target`` needs to see."""

    def on_headers_complete(self) -> None:
        target = self.url
        foreign = target[:1] != b"/"
        if foreign:
            self.url = b"/"
        super().on_headers_complete()  # builds the scope and schedules the app (it has not run yet)
        if foreign:
            self.url = target
            self.scope["path"] = target.decode("latin-1")
