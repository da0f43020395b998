"""The proxy app's own work per call, without sockets or load: for instruction counts and profiles.

Drives ``ProxyServer.__call__`` in-process with bench/proxy.py's body (64 sessions, captures on,
the zero-latency echo backend), one call after another, round robin over the sessions. Wall-clock
figures on a shared machine are noisy; instruction counts are not, so compare code with

    valgrind --tool=callgrind --callgrind-out-file=/dev/null python3 bench/proxy_calls.py --calls N

at two values of N: (instructions at N2 - at N1) / (N2 - N1) is the app's cost per call. ``--bare``
runs bench/proxy.py's bare pass-through app the same way; ``--profile FILE`` writes a cProfile.

Prints figures; never asserts (bench/ is not a test tier).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from proxy import _body, _echo, bare_app  # noqa: E402  (bench/proxy.py)


async def _drive(app, keys: list[str], calls: int, kb: int, warm: int = 0) -> tuple[float, float]:
    template = json.dumps(_body(0, 0, kb, "anthropic")).encode()
    sent: list[dict] = []

    async def send(msg: dict) -> None:
        sent.append(msg)

    t0 = resource.getrusage(resource.RUSAGE_SELF)
    for n in range(calls):
        if n == warm and os.environ.get("CLAWGYM_CALLGRIND_ON"):  # collect from here on (valgrind --instr-atstart=no)
            subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], check=True, capture_output=True)
        s, c = n % len(keys), n // len(keys)
        data = template.replace(b"MARK[0:0]", f"MARK[{s}:{c}]".encode())
        msgs = [{"type": "http.request", "body": data, "more_body": False}]

        async def receive() -> dict:
            return msgs.pop() if msgs else {"type": "http.disconnect"}

        scope = {
            "type": "http",
            "method": "POST",
            "path": "/v1/messages",
            "query_string": b"",
            "headers": [
                (b"host", b"127.0.0.1"),
                (b"x-api-key", keys[s].encode()),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
            ],
        }
        sent.clear()
        await app(scope, receive, send)
        if f"MARK[{s}:{c}]".encode() not in sent[-1]["body"]:
            raise SystemExit(f"call {n}: reply lacks its marker")
    t1 = resource.getrusage(resource.RUSAGE_SELF)
    return t1.ru_utime - t0.ru_utime, t1.ru_stime - t0.ru_stime


async def _main(args: argparse.Namespace) -> None:
    if args.bare:
        _report("bare app", await _drive(bare_app, ["bare"] * args.sessions, args.calls, args.body_kb, args.sessions), args.calls)
        return
    from clawgym_env.proxy import ProxyServer, ScriptedBackend
    from clawgym_env.proxy.server import _tune_gc

    _tune_gc()
    with tempfile.TemporaryDirectory() as tmp:
        server = ProxyServer()
        sessions = [
            server.open_session(ScriptedBackend(_echo), session_id=f"s{i}", capture_path=Path(tmp) / f"s{i}.jsonl")
            for i in range(args.sessions)
        ]
        cpu = await _drive(server, [s.api_key for s in sessions], args.calls, args.body_kb, args.sessions)
        for s in sessions:
            await server.close_session(s.session_id)
        size = sum((Path(tmp) / f"s{i}.jsonl").stat().st_size for i in range(args.sessions))
    _report("proxy app", cpu, args.calls)
    print(f"capture: {size / args.calls:.0f} bytes per call")


def _report(name: str, cpu: tuple[float, float], calls: int) -> None:
    user, system = cpu
    print(
        f"{name}: {(user + system) / calls * 1e6:.0f} us CPU per call (user {user / calls * 1e6:.0f}, "
        f"system {system / calls * 1e6:.0f}) over {calls} calls"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=640)
    ap.add_argument("--sessions", type=int, default=64)
    ap.add_argument("--body-kb", type=int, default=52)
    ap.add_argument("--bare", action="store_true", help="bench/proxy.py's bare pass-through app instead")
    ap.add_argument("--profile", metavar="FILE", help="write a cProfile of the calls to FILE")
    args = ap.parse_args()
    if args.profile:
        import cProfile

        with cProfile.Profile() as prof:
            asyncio.run(_main(args))
        prof.dump_stats(args.profile)
        return
    asyncio.run(_main(args))


if __name__ == "__main__":
    main()
