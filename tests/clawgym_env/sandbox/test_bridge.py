"""The bwrap sandbox's proxy bridge, each kind (host-side listener, socat, python forwarder): it carries
whole requests both ways, reaches only its own proxy socket, and the host-side one leaves nothing behind."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from clawgym_env.sandbox import SandboxConfig, _bridge, create_sandbox
from clawgym_env.sandbox._bwrap_host import probe_bwrap
from clawgym_env.sandbox._bwrap_spare import drop_spares

pytestmark = pytest.mark.sandbox

_ECHO = (  # POST n bytes, expect them back reversed (a body larger than any socket buffer: flow control)
    "import sys, urllib.request\n"
    "n = int(sys.argv[2]); body = bytes(range(256)) * (n // 256)\n"
    "r = urllib.request.urlopen(urllib.request.Request('http://127.0.0.1:%s/echo' % sys.argv[1], data=body), timeout=30)\n"
    "got = r.read(); print(r.headers['X-Who'], len(got), got == body[::-1])\n"
)


async def _echo_server(path: Path, who: str) -> asyncio.AbstractServer:
    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        head = await r.readuntil(b"\r\n\r\n")
        n = int(next(ln.split(b":")[1] for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length")))
        body = (await r.readexactly(n))[::-1]
        w.write(b"HTTP/1.1 200 OK\r\nX-Who: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % (who.encode(), n))
        w.write(body)
        await w.drain()
        w.close()

    return await asyncio.start_unix_server(handle, str(path))


def _force(monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    if kind == "host" and probe_bwrap().netns:
        pytest.skip(f"this host cannot listen inside a sandbox's network namespace: {probe_bwrap().netns}")
    if kind == "socat" and _bridge.socat_path() is None:
        pytest.skip("no socat on this host")
    monkeypatch.setattr(_bridge, "choose", lambda refused, rootfs: kind)


@pytest.mark.parametrize("kind", ["host", "socat", "python"])
async def test_each_bridge_carries_large_requests_both_ways(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _force(monkeypatch, kind)
    server = await _echo_server(tmp_path / "p.sock", "proxy-a")
    try:
        async with create_sandbox("bwrap", SandboxConfig(proxy_socket=tmp_path / "p.sock", proxy_port=18790)) as sb:
            assert sb._bridge_kind == kind  # type: ignore[attr-defined]
            for _ in range(2):  # every exec gets its own bridge
                r = await sb.exec(["python3", "-c", _ECHO, "18790", str(3 << 20)], timeout=60)
                assert r.return_code == 0, r.stderr
                assert r.stdout.split() == ["proxy-a", str(3 << 20), "True"]
    finally:
        server.close()


def _net_namespaces_of_our_threads() -> set[str]:
    return {os.readlink(f"/proc/self/task/{t}/ns/net") for t in os.listdir("/proc/self/task")}


async def test_host_bridge_listens_only_inside_and_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two sandboxes at once, each with its own proxy socket, on the same port inside: each reaches its own;
    the port is not open on the host's loopback; afterwards no thread of ours is in another network namespace
    and no descriptor the bridges opened is left."""
    _force(monkeypatch, "host")
    servers = [await _echo_server(tmp_path / f"{w}.sock", w) for w in ("a", "b")]
    fds_before = set(os.listdir("/proc/self/fd"))
    netns_before = _net_namespaces_of_our_threads()
    port = 18791
    probe_host = (
        "import socket\ns = socket.socket(); s.settimeout(2)\n"
        f"try:\n s.connect(('127.0.0.1', {port})); print('OPEN')\nexcept OSError:\n print('closed')\n"
    )
    try:
        async with (
            create_sandbox("bwrap", SandboxConfig(proxy_socket=tmp_path / "a.sock", proxy_port=port)) as a,
            create_sandbox("bwrap", SandboxConfig(proxy_socket=tmp_path / "b.sock", proxy_port=port)) as b,
        ):
            wait = "import time; time.sleep(1.5)\n"
            ra, rb = await asyncio.gather(
                a.exec(["python3", "-c", wait + _ECHO, str(port), "4096"], timeout=60),
                b.exec(["python3", "-c", wait + _ECHO, str(port), "4096"], timeout=60),
            )
            assert ra.stdout.split() == ["a", "4096", "True"], ra.stderr
            assert rb.stdout.split() == ["b", "4096", "True"], rb.stderr
            during = asyncio.ensure_future(a.exec(["sleep", "2"], timeout=30))
            await asyncio.sleep(0.5)
            host = await asyncio.create_subprocess_exec("python3", "-c", probe_host, stdout=asyncio.subprocess.PIPE)
            out, _ = await host.communicate()
            assert out.decode().strip() == "closed"  # the listener is in the sandbox's namespace, not the host's
            await during
    finally:
        for s in servers:
            s.close()
    assert _net_namespaces_of_our_threads() <= netns_before
    drop_spares()  # the spare launchers made meanwhile hold their pipes until taken (``_bwrap_spare``)
    assert set(os.listdir("/proc/self/fd")) <= fds_before | {"%d" % fd for fd in range(3)}
