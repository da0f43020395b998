"""The sandbox's one way out: a loopback port inside forwarded to the proxy's host unix socket.

Inside the sandbox a forwarder listens on ``127.0.0.1:PORT`` and connects each client to the
socket bind-mounted at ``SOCKET_INSIDE``. socat is preferred: measured with bench/sandbox.py on
the 2-core dev box (load ~11), an exec with the socat bridge took 63 ms median against 41 ms
without a bridge, and 654 ms with the stdlib python forwarder (interpreter start-up), which is
only the fallback when socat is absent.
``prelude`` is a shell script that starts the forwarder, waits until the port is LISTENing (read
from /proc/net/tcp, so no client probe is needed), then execs the real command.
"""

from __future__ import annotations

import shutil
import sys

__all__ = ["SOCKET_DIR_INSIDE", "SOCKET_INSIDE", "prelude", "python_forwarder_source", "socat_path"]

SOCKET_DIR_INSIDE = "/run/clawgym"
SOCKET_INSIDE = f"{SOCKET_DIR_INSIDE}/proxy.sock"

_PY_FORWARDER = r"""
import asyncio, sys
port, sock = int(sys.argv[1]), sys.argv[2]
async def pipe(r, w):
    try:
        while d := await r.read(65536):
            w.write(d); await w.drain()
    except Exception:
        pass
    finally:
        w.close()
async def handle(r, w):
    try:
        ur, uw = await asyncio.open_unix_connection(sock)
    except OSError:
        w.close(); return
    await asyncio.gather(pipe(r, uw), pipe(ur, w))
async def main():
    srv = await asyncio.start_server(handle, "127.0.0.1", port, reuse_address=True)
    async with srv:
        await srv.serve_forever()
asyncio.run(main())
"""


def socat_path() -> str | None:
    """The host's socat, or None."""
    return shutil.which("socat")


def python_forwarder_source() -> str:
    return _PY_FORWARDER


def prelude(port: int, use_socat: bool, python: str = sys.executable) -> list[str]:
    """argv prefix: start the forwarder, wait for LISTEN on ``port``, then ``exec "$@"``."""
    if use_socat:
        fwd = (
            f"socat TCP-LISTEN:{port},bind=127.0.0.1,fork,reuseaddr "
            f"UNIX-CONNECT:{SOCKET_INSIDE} </dev/null >/dev/null 2>&1 &"
        )
    else:
        fwd = f'"$CLAWGYM_PY" -c "$CLAWGYM_FWD" {port} {SOCKET_INSIDE} </dev/null >/dev/null 2>&1 &'
    hexport = f"{port:04X}"
    # Poll /proc/net/tcp with shell builtins only (no grep forks competing with socat for CPU).
    script = (
        f"{fwd}\n"
        "ready() { while read -r _ l _ st _; do [ \"$l $st\" = \"00000000:"
        f"{hexport} 0A\" ] || [ \"$l $st\" = \"0100007F:{hexport} 0A\" ] && return 0; done </proc/net/tcp; return 1; }}\n"
        "i=0\n"
        "until ready; do\n"
        "  i=$((i+1)); if [ $i -gt 3000 ]; then echo 'clawgym: proxy forwarder did not start' >&2; exit 125; fi\n"
        "  [ $i -gt 200 ] && sleep 0.005\n"
        "done\n"
        "unset CLAWGYM_FWD CLAWGYM_PY\n"
        'exec "$@"'
    )
    return ["/bin/sh", "-c", script, "clawgym-init"]


def prelude_env(use_socat: bool, python: str = sys.executable) -> dict[str, str]:
    """Variables the python fallback needs (empty with socat)."""
    return {} if use_socat else {"CLAWGYM_PY": python, "CLAWGYM_FWD": _PY_FORWARDER}
