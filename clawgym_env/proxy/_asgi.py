"""ASGI plumbing the proxy's handlers share: JSON replies, SSE headers, and waiting on a call while
watching for the client to hang up."""

from __future__ import annotations

import asyncio
import contextlib
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any

import orjson

__all__ = ["JSON_HEADERS", "KEEPALIVE", "SSE_HEADERS", "Disconnected", "send_json", "until_disconnect"]

JSON_HEADERS = [(b"content-type", b"application/json")]
SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
KEEPALIVE = b": keep-alive\n\n"  # an SSE comment: every SSE parser skips it


class Disconnected(Exception):
    """The client hung up before its reply was sent."""


async def send_json(send: Any, status: int, payload: dict[str, Any]) -> None:
    body = orjson.dumps(payload)
    await send({"type": "http.response.start", "status": status, "headers": [*JSON_HEADERS, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def until_disconnect(
    coro: Coroutine[Any, Any, Any], receive: Any, idle_s: float | None = None, on_idle: Callable[[], Awaitable[None]] | None = None
) -> Any:
    """Await ``coro`` unless the client hangs up first (then cancel it and raise Disconnected).

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
            finished, _ = await asyncio.wait({work, watch}, timeout=idle_s, return_when=asyncio.FIRST_COMPLETED)
            if work in finished:
                return work.result()
            if watch in finished:
                if watch.result().get("type") == "http.disconnect":
                    work.cancel()
                    with contextlib.suppress(BaseException):
                        await work
                    raise Disconnected
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
        except BaseException as exc:  # noqa: BLE001 - the task's cancellation, or an exception thrown in
            try:
                pending = coro.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            try:
                pending = coro.send(sent)
            except StopIteration as done:
                return done.value
