"""The JSON-over-HTTP client that remote backends (vLLM, API passthrough) share.

aiohttp, not httpx: measured (docs/design.md), an aiohttp client costs ~0.6 ms of CPU per call
against ~4.3 ms for httpx, and httpx's p99 reached 1.6 s at 64 concurrent streams. A session is
bound to the event loop that created it, so one is kept per loop.

A kept-alive connection the server has since closed (uvicorn, under vLLM, drops idle ones after
5 s) fails as ``ServerDisconnectedError`` before any answer: such a request is sent once more on
a fresh connection of its own, never on another pooled one that may be just as stale.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from clawgym_env.errors import PolicyBackendError, UpstreamTimeout

__all__ = ["JSONClient"]


class JSONClient:
    """POST/GET JSON to one base URL; maps transport failures to ClawGym errors."""

    def __init__(self, base_url: str, *, headers: dict[str, str] | None = None, timeout: float = 600.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.headers = dict(headers or {})
        self.timeout = timeout
        self._sessions: dict[asyncio.AbstractEventLoop, Any] = {}

    def _session(self) -> Any:
        import aiohttp

        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None or session.closed:
            for old in [lp for lp in self._sessions if lp.is_closed()]:
                del self._sessions[old]  # loops that ended (tests, run_sync) leave dead sessions
            session = aiohttp.ClientSession(headers=self.headers, timeout=aiohttp.ClientTimeout(total=self.timeout))
            self._sessions[loop] = session
        return session

    async def request(self, method: str, path: str, body: Any | None = None, *, what: str) -> Any:
        """Send one request and return the decoded JSON (or None for an empty body).

        ``what`` names the backend in error messages ("vLLM server", "OpenAI API" ...).
        """
        import aiohttp

        url = self.base_url + path
        try:
            try:
                status, raw = await self._send(self._session(), method, url, body)
            except aiohttp.ServerDisconnectedError:  # a stale kept-alive connection: once more, on a new one
                async with aiohttp.ClientSession(
                    headers=self.headers,
                    timeout=aiohttp.ClientTimeout(total=self.timeout),
                    connector=aiohttp.TCPConnector(force_close=True),
                ) as fresh:
                    status, raw = await self._send(fresh, method, url, body)
        except TimeoutError as exc:
            raise UpstreamTimeout(f"{what} at {url} did not answer within {self.timeout} s") from exc
        except aiohttp.ClientError as exc:
            raise PolicyBackendError(f"{what} at {url} is unreachable: {type(exc).__name__}: {exc}") from exc
        if status >= 400:
            excerpt = raw[:500].decode("utf-8", "replace")
            raise PolicyBackendError(f"{what} at {url} answered HTTP {status}: {excerpt}")
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise PolicyBackendError(f"{what} at {url} sent invalid JSON: {raw[:200]!r}") from exc

    @staticmethod
    async def _send(session: Any, method: str, url: str, body: Any | None) -> tuple[int, bytes]:
        async with session.request(method, url, json=body) as resp:
            return resp.status, await resp.read()

    async def aclose(self) -> None:
        """Close the session of the running loop (others die with their loops)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        session = self._sessions.pop(loop, None)
        if session is not None and not session.closed:
            await session.close()
