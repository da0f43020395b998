"""The sandbox's one way out: a loopback port inside forwarded to the proxy's host unix socket.

Two ways to put a listener on ``127.0.0.1:PORT`` inside:

* **From the host** (bwrap, where this process may enter a sandbox's network namespace: root with
  CAP_SYS_ADMIN; ``probe_bwrap().netns`` says): while bwrap holds the exec before its command
  (``_bwrap_hold``), ``listen_inside`` makes the listening socket in that namespace from a fresh thread,
  and ``Relay`` copies each connection to the proxy's socket on this process's event loop. Nothing
  starts inside and nothing waits for a forwarder to come up: measured (bench/episode_cpu.py), an exec
  with the socat bridge cost 18.5 ms CPU and 179 ms wall against 8.6 ms and 95 ms without a bridge
  (load 5.6).
* **From inside** (docker; bwrap elsewhere): ``prelude``, a shell script that starts a forwarder
  (socat; the stdlib python forwarder where socat is absent), waits until the port is LISTENing
  (read from /proc/net/tcp, so no client probe is needed), then execs the real command. socat is
  preferred: with bench/sandbox.py on the 2-core dev box (load ~10) an exec with the socat bridge
  took 51 ms median against 20 ms without one (``TCP4-LISTEN``: 23 ms to listen vs 35 ms for
  ``TCP-LISTEN``), and 120-200 ms with the python forwarder (threads, ``-I -S``; interpreter start-up).
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import shutil
import socket
import threading
from pathlib import Path

__all__ = [
    "SOCKET_DIR_INSIDE",
    "SOCKET_INSIDE",
    "Relay",
    "choose",
    "enter_and_listen",
    "listen_inside",
    "prelude",
    "python_forwarder_source",
    "socat_path",
]

SOCKET_DIR_INSIDE = "/run/clawgym"
SOCKET_INSIDE = f"{SOCKET_DIR_INSIDE}/proxy.sock"

_PY_FORWARDER = r"""
import socket, sys, threading
port, path = int(sys.argv[1]), sys.argv[2]
def pipe(a, b):
    try:
        while d := a.recv(65536):
            b.sendall(d)
    except OSError:
        pass
    finally:
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
def serve(c):
    u = socket.socket(socket.AF_UNIX)
    try:
        u.connect(path)
    except OSError:
        c.close(); return
    threading.Thread(target=pipe, args=(c, u), daemon=True).start()
    pipe(u, c)
    c.close(); u.close()
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port)); srv.listen(128)
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""


def choose(netns_refused: str, rootfs: bool) -> str:
    """The bridge a bwrap sandbox uses: ``host`` where this process may listen inside its network namespace
    (``netns_refused`` empty), else ``socat`` (the host's, or the rootfs's own), else ``python``."""
    if not netns_refused:
        return "host"
    return "socat" if socat_path() is not None or rootfs else "python"


def socat_path() -> str | None:
    """The host's socat, or None."""
    return shutil.which("socat")


def python_forwarder_source() -> str:
    return _PY_FORWARDER


def prelude(port: int, use_socat: bool, python: str = "python3") -> list[str]:
    """argv prefix: start the forwarder, wait for LISTEN on ``port``, then ``exec "$@"``."""
    if use_socat:
        fwd = f"socat TCP4-LISTEN:{port},bind=127.0.0.1,fork,reuseaddr UNIX-CONNECT:{SOCKET_INSIDE} </dev/null >/dev/null 2>&1 &"
    else:
        fwd = f'"$CLAWGYM_PY" -I -S -c "$CLAWGYM_FWD" {port} {SOCKET_INSIDE} </dev/null >/dev/null 2>&1 &'
    hexport = f"{port:04X}"
    # Poll /proc/net/tcp with shell builtins only (no grep forks competing with socat for CPU).
    script = (
        f"{fwd}\n"
        'ready() { while read -r _ l _ st _; do [ "$l $st" = "00000000:'
        f'{hexport} 0A" ] || [ "$l $st" = "0100007F:{hexport} 0A" ] && return 0; done </proc/net/tcp; return 1; }}\n'
        "i=0\n"
        "until ready; do\n"
        "  i=$((i+1)); if [ $i -gt 3000 ]; then echo 'clawgym: proxy forwarder did not start' >&2; exit 125; fi\n"
        "  [ $i -gt 200 ] && sleep 0.005\n"
        "done\n"
        "unset CLAWGYM_FWD CLAWGYM_PY\n"
        'exec "$@"'
    )
    return ["/bin/sh", "-c", script, "clawgym-init"]


def prelude_env(use_socat: bool, python: str = "python3") -> dict[str, str]:
    """Variables the python fallback needs (empty with socat)."""
    return {} if use_socat else {"CLAWGYM_PY": python, "CLAWGYM_FWD": _PY_FORWARDER}


_CLONE_NEWNET = 0x40000000


def enter_and_listen(pid: int, port: int) -> socket.socket:
    """``listen_inside``'s work, in the calling thread (which must be one that ends afterwards)."""
    libc = ctypes.CDLL(None, use_errno=True)
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        target = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        try:
            if libc.setns(target, _CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"setns into the network namespace of pid {pid}: {os.strerror(err)}")
        finally:
            os.close(target)
        try:
            # any address: the namespace has loopback only, which bwrap may not have brought up yet
            sock = socket.create_server(("0.0.0.0", port), backlog=1024)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        finally:
            if libc.setns(own, _CLONE_NEWNET) != 0:  # never happens (we just left it); the thread then ends there
                raise OSError(ctypes.get_errno(), "setns back into this process's network namespace failed")
    finally:
        os.close(own)
    return sock


async def listen_inside(pid: int, port: int) -> socket.socket:
    """A TCP socket listening on ``port`` in the network namespace of process ``pid`` (a sandbox's, before
    anything of the agent runs there). Made from a fresh thread, which alone enters that namespace (setns
    moves only the calling thread) and ends afterwards, so no thread of ours ever stays inside."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[socket.socket] = loop.create_future()

    def settle(result: socket.socket | BaseException) -> None:
        if done.cancelled():
            if isinstance(result, socket.socket):
                result.close()
        elif isinstance(result, BaseException):
            done.set_exception(result)
        else:
            done.set_result(result)

    def run() -> None:
        try:
            result: socket.socket | BaseException = enter_and_listen(pid, port)
        except BaseException as exc:  # noqa: BLE001 - reported to the caller
            result = exc
        try:
            loop.call_soon_threadsafe(settle, result)
        except RuntimeError:  # the loop is gone
            if isinstance(result, socket.socket):
                result.close()

    threading.Thread(target=run, name="clawgym-netns-listen", daemon=True).start()
    return await done


class _Half(asyncio.Protocol):
    """One side of a relayed connection: what it receives goes out on its peer's transport."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: _Half | None = None
        self.eof = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        assert self.peer is not None and self.peer.transport is not None
        self.peer.transport.write(data)

    def eof_received(self) -> bool:
        self.eof = True
        peer = self.peer
        if peer is None or peer.transport is None or peer.eof:
            return False  # both directions done: close
        if peer.transport.can_write_eof():
            peer.transport.write_eof()
        return True  # the other direction may still carry data

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()

    def pause_writing(self) -> None:  # our transport is full: stop reading what feeds it
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()


class _Inbound(_Half):
    """A connection from inside the sandbox: reading waits until the proxy's socket is connected."""

    def __init__(self, uds_path: str) -> None:
        super().__init__()
        self._uds_path = uds_path

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        assert self.transport is not None
        self.transport.pause_reading()
        asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        assert self.transport is not None
        out = _Half()
        out.peer = self
        try:
            await asyncio.get_running_loop().create_unix_connection(lambda: out, self._uds_path)
        except OSError:
            self.transport.close()
            return
        self.peer = out
        if self.transport.is_closing():
            assert out.transport is not None
            out.transport.close()
            return
        self.transport.resume_reading()


class Relay:
    """Serves one listening socket made by ``listen_inside``: each connection is copied both ways to and from
    a fresh connection to the proxy's unix socket (as the socat bridge does), on this event loop."""

    def __init__(self, server: asyncio.Server) -> None:
        self._server = server

    @classmethod
    async def serve(cls, listener: socket.socket, uds_path: Path) -> Relay:
        path = str(uds_path)
        server = await asyncio.get_running_loop().create_server(lambda: _Inbound(path), sock=listener)
        return cls(server)

    def close(self) -> None:
        """Stop listening (connections still open end with the sandbox's processes)."""
        self._server.close()
