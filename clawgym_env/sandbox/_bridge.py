"""The sandbox's one way out: a loopback port inside forwarded to the proxy's host unix socket.

Inside the sandbox a forwarder listens on ``127.0.0.1:PORT`` and connects each client to the
socket bind-mounted at ``SOCKET_INSIDE``. socat is preferred: measured with bench/sandbox.py on
the 2-core dev box (load ~10), an exec with the socat bridge took 51 ms median against 20 ms
without a bridge (``TCP4-LISTEN``: 23 ms to listen vs 35 ms for ``TCP-LISTEN``), and 120-200 ms
with the stdlib python forwarder (threads, ``-I -S``; interpreter start-up), which is only the fallback when socat
is absent.
``prelude`` is a shell script that starts the forwarder, waits until the port is LISTENing (read
from /proc/net/tcp, so no client probe is needed), then execs the real command.
"""

from __future__ import annotations

import shutil

__all__ = ["SOCKET_DIR_INSIDE", "SOCKET_INSIDE", "prelude", "python_forwarder_source", "socat_path"]

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


def socat_path() -> str | None:
    """The host's socat, or None."""
    return shutil.which("socat")


def python_forwarder_source() -> str:
    return _PY_FORWARDER


def prelude(port: int, use_socat: bool, python: str = "python3") -> list[str]:
    """argv prefix: start the forwarder, wait for LISTEN on ``port``, then ``exec "$@"``."""
    if use_socat:
        fwd = (
            f"socat TCP4-LISTEN:{port},bind=127.0.0.1,fork,reuseaddr "
            f"UNIX-CONNECT:{SOCKET_INSIDE} </dev/null >/dev/null 2>&1 &"
        )
    else:
        fwd = f'"$CLAWGYM_PY" -I -S -c "$CLAWGYM_FWD" {port} {SOCKET_INSIDE} </dev/null >/dev/null 2>&1 &'
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


def prelude_env(use_socat: bool, python: str = "python3") -> dict[str, str]:
    """Variables the python fallback needs (empty with socat)."""
    return {} if use_socat else {"CLAWGYM_PY": python, "CLAWGYM_FWD": _PY_FORWARDER}
