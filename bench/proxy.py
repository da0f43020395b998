"""Proxy overhead under load: 64 concurrent streaming sessions against a zero-latency backend.

The server runs in its own process (so its CPU can be measured alone); clients use aiohttp.
Each request carries a marker (session, call); the echo backend answers with it, so every
reply and every captured record can be checked for loss and misattribution.

    python bench/proxy.py [--sessions 64] [--calls 20] [--body-kb 52] [--dialect anthropic|openai-chat] [--rounds N]

Prints figures; never asserts (bench/ is not a test tier).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

WRITE_SCHEMA = {"type": "object", "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}}}


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


# ---------------------------------------------------------------------------- server process
def _echo(request):  # zero latency: answer with the marker of the last user message
    marker = request.messages[-1]["content"].split("MARK[", 1)[1].split("]", 1)[0]
    if marker.endswith(":tool"):
        return {"text": "", "tool_calls": [{"name": "Write", "arguments": {"file_path": marker, "content": "x"}}]}
    return {"text": f"ok MARK[{marker}]"}


async def _serve(n_sessions: int, capture_dir: str) -> None:
    from clawgym_env.proxy import ProxyServer, ScriptedBackend

    async with ProxyServer(uds_path=Path(capture_dir) / "proxy.sock") as server:
        sessions = [
            server.open_session(ScriptedBackend(_echo), session_id=f"s{i}", capture_path=Path(capture_dir) / f"s{i}.jsonl")
            for i in range(n_sessions)
        ]
        print(json.dumps({"url": server.url, "keys": [s.api_key for s in sessions]}), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        cpu = time.process_time()
        report = {"server_cpu_s": cpu, "sessions": {}}
        for s in sessions:
            recs = await server.close_session(s.session_id)
            report["sessions"][s.session_id] = [
                {
                    "i": r.call_index,
                    "status": r.status,
                    "latency_s": r.latency_s,
                    "stream": r.stream,
                    "mark": r.messages[-1]["content"].split("MARK[", 1)[1].split("]", 1)[0] if r.messages else None,
                }
                for r in recs
            ]
        print(json.dumps(report), flush=True)


async def bare_app(scope, receive, send):
    """The floor any proxy pays: read + parse the JSON body, answer a pre-framed Anthropic SSE reply
    carrying the marker. No dialect translation, no capture. Served by ``_serve_bare``."""
    if scope["type"] != "http":
        return
    chunks = []
    while True:
        msg = await receive()
        chunks.append(msg.get("body", b""))
        if not msg.get("more_body"):
            break
    body = orjson.loads(b"".join(chunks))
    last = body["messages"][-1]["content"]
    text = last if isinstance(last, str) else last[0]["text"]
    marker = text.split("MARK[", 1)[1].split("]", 1)[0]
    delta = orjson.dumps({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": f"ok MARK[{marker}]"}})
    frames = (
        b'event: message_start\ndata: {"type":"message_start"}\n\n'
        b"event: content_block_delta\ndata: " + delta + b"\n\n"
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream"), (b"content-length", str(len(frames)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": frames})


async def _serve_bare(capture_dir: str) -> None:
    """``bare_app`` on uvicorn with the proxy's HTTP parser and settings."""
    import socket

    import uvicorn

    from clawgym_env.proxy.server import HTTP_IMPL

    sock = socket.create_server(("127.0.0.1", 0))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    # the proxy's uvicorn settings (no X-Forwarded-* middleware), so both pay the same server stack
    cfg = uvicorn.Config(bare_app, http=HTTP_IMPL, log_level="warning", access_log=False, lifespan="off", proxy_headers=False, backlog=2048)
    server = uvicorn.Server(cfg)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    print(json.dumps({"url": f"http://127.0.0.1:{sock.getsockname()[1]}", "keys": ["bare"] * 1024}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    print(json.dumps({"sessions": {}}), flush=True)
    server.should_exit = True
    await task


# ---------------------------------------------------------------------------- client side
def _body(session: int, call: int, kb: int, dialect: str) -> dict:
    system = ("You are a coding agent. Follow the rules carefully. " * 400)[: kb * 1024 // 3]
    tools = [{"name": f"Tool{i}", "description": "Does a thing. " * 60, "input_schema": WRITE_SCHEMA} for i in range(12)]
    filler = ("Earlier context line with some code: for i in range(10): print(i)\n" * 400)[: kb * 1024 // 4]
    mark = f"MARK[{session}:{call}]"
    if dialect == "anthropic":
        return {
            "model": "policy",
            "max_tokens": 256,
            "stream": True,
            "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
            "tools": tools,
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": filler}]},
                {"role": "assistant", "content": "noted"},
                {"role": "user", "content": [{"type": "text", "text": f"do it {mark}", "cache_control": {"type": "ephemeral"}}]},
            ],
        }
    return {
        "model": "policy",
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [
            {"type": "function", "function": {"name": t["name"], "description": t["description"], "parameters": t["input_schema"]}}
            for t in tools
        ],
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": filler},
            {"role": "assistant", "content": "noted"},
            {"role": "user", "content": f"do it {mark}"},
        ],
    }


async def _client(url: str, key: str, session: int, calls: int, kb: int, dialect: str, lat: list[float], errors: list[str]) -> int:
    import aiohttp

    path = "/v1/messages" if dialect == "anthropic" else "/v1/chat/completions"
    headers = {"x-api-key": key, "authorization": f"Bearer {key}", "content-type": "application/json"}
    ok = 0
    template = json.dumps(_body(0, 0, kb, dialect)).encode()  # built once: the client must stay cheap
    async with aiohttp.ClientSession(base_url=url) as http:
        for call in range(calls):
            data = template.replace(b"MARK[0:0]", f"MARK[{session}:{call}]".encode())
            t0 = time.perf_counter()
            async with http.post(path, data=data, headers=headers) as r:
                text = await r.text()
            lat.append(time.perf_counter() - t0)
            if r.status != 200 or f"MARK[{session}:{call}]" not in text:
                errors.append(f"session {session} call {call}: status {r.status}, reply lacks its marker")
            else:
                ok += 1
    return ok


async def _load(url: str, keys: list[str], calls: int, kb: int, dialect: str, concurrency: int) -> dict:
    lat: list[float] = []
    errors: list[str] = []
    t0 = time.perf_counter()
    oks = await asyncio.gather(*(_client(url, keys[i], i, calls, kb, dialect, lat, errors) for i in range(concurrency)))
    wall = time.perf_counter() - t0
    return {"lat": lat, "errors": errors, "ok": sum(oks), "wall": wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=64)
    ap.add_argument("--calls", type=int, default=20, help="calls per session")
    ap.add_argument("--body-kb", type=int, default=52)
    ap.add_argument("--dialect", choices=["anthropic", "openai-chat"], default="anthropic")
    ap.add_argument("--rounds", type=int, default=1, help="bare and proxy measured alternately this many times")
    ap.add_argument("--no-tito", action="store_true", help="skip the TITO prompt-building figure")
    ap.add_argument("--serve", metavar="DIR", help=argparse.SUPPRESS)
    ap.add_argument("--serve-bare", metavar="DIR", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        if os.environ.get("CLAWGYM_BENCH_PROFILE"):  # cProfile the server process (where proxy CPU goes)
            import cProfile

            with cProfile.Profile() as prof:
                asyncio.run(_serve(args.sessions, args.serve))
            prof.dump_stats(os.environ["CLAWGYM_BENCH_PROFILE"])
            return
        asyncio.run(_serve(args.sessions, args.serve))
        return
    if args.serve_bare:
        asyncio.run(_serve_bare(args.serve_bare))
        return
    ratios = []
    for rnd in range(args.rounds):
        if args.rounds > 1:
            print(f"round {rnd + 1} of {args.rounds}, load average {os.getloadavg()[0]:.1f}")
        results = {}
        for kind in ("bare", "proxy") if args.dialect == "anthropic" else ("proxy",):
            results[kind] = _measure(kind, args)
        for kind, r in results.items():
            _print(kind, r, args)
        if "bare" in results:
            ratios.append(results["proxy"]["loaded_rate"] / results["bare"]["loaded_rate"])
            added = results["proxy"]["cpu_single"] - results["bare"]["cpu_single"]
            added_loaded = results["proxy"]["cpu_loaded"] - results["bare"]["cpu_loaded"]
            print(
                f"  proxy vs bare pass-through, same run: {ratios[-1]:.2f}x the throughput at {args.sessions} streams; "
                f"+{added_loaded * 1e3:.2f} ms server CPU per call there, +{added * 1e3:.2f} ms with 1 client"
            )
    if len(ratios) > 1:
        print(
            f"proxy / bare throughput over {len(ratios)} rounds: median {statistics.median(ratios):.2f}x "
            f"(min {min(ratios):.2f}, max {max(ratios):.2f})"
        )
    if not args.no_tito:
        _tito_cost()
    print(f"  load average {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)")


def _measure(kind: str, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        flag = "--serve-bare" if kind == "bare" else "--serve"
        proc = subprocess.Popen(
            [sys.executable, __file__, flag, tmp, "--sessions", str(args.sessions)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        info = json.loads(proc.stdout.readline())
        url, keys = info["url"], info["keys"]
        # single client, sequential: the latency one call pays for the proxy
        asyncio.run(_load(url, keys, 10, args.body_kb, args.dialect, 1))  # warm-up (session 0)
        cpu0 = _proc_cpu(proc.pid)
        single = asyncio.run(_load(url, keys, 100, args.body_kb, args.dialect, 1))
        cpu1, threads1, client1 = _proc_cpu(proc.pid), _thread_cpu(proc.pid), time.process_time()
        loaded = asyncio.run(_load(url, keys, args.calls, args.body_kb, args.dialect, args.sessions))
        cpu2, threads2, client2 = _proc_cpu(proc.pid), _thread_cpu(proc.pid), time.process_time()
        proc.stdin.write("\n")
        proc.stdin.flush()
        report = json.loads(proc.stdout.readline())
        proc.wait(timeout=60)
    n_single, n_load = len(single["lat"]), len(loaded["lat"])
    return {
        "single": single,
        "loaded": loaded,
        "report": report,
        "cpu_single": (cpu1 - cpu0) / n_single,
        "cpu_loaded": (cpu2 - cpu1) / n_load,
        "loaded_rate": n_load / loaded["wall"],
        "client_cpu": (client2 - client1) / n_load,
        "threads": {name: (t - threads1.get(name, 0.0)) / n_load for name, t in threads2.items()},
    }


def _print(kind: str, r: dict, args: argparse.Namespace) -> None:
    single, loaded, report = r["single"], r["loaded"], r["report"]
    name = "bare pass-through" if kind == "bare" else "clawgym proxy"
    print(
        f"{name}: dialect={args.dialect} body={args.body_kb} kB, zero-latency backend"
        + (", every call captured (written at once, fsynced within FSYNC_INTERVAL_S)" if kind == "proxy" else "")
    )
    print(
        f"  1 client  x {len(single['lat'])} calls: latency p50 {_pct(single['lat'], 50) * 1e3:.2f} ms, "
        f"p99 {_pct(single['lat'], 99) * 1e3:.2f} ms; server CPU {r['cpu_single'] * 1e3:.2f} ms/call"
    )
    print(
        f"  {args.sessions} sessions x {args.calls} calls (streaming, concurrent): {r['loaded_rate']:.0f} calls/s, "
        f"client latency p50 {_pct(loaded['lat'], 50) * 1e3:.1f} ms, p99 {_pct(loaded['lat'], 99) * 1e3:.1f} ms; "
        f"server CPU {r['cpu_loaded'] * 1e3:.2f} ms/call"
    )
    busy = {name: t for name, t in r["threads"].items() if t >= 5e-6}
    print(
        f"  CPU per call at {args.sessions} streams: client {r['client_cpu'] * 1e3:.2f} ms; server threads "
        + ", ".join(f"{name} {t * 1e3:.2f} ms" for name, t in sorted(busy.items(), key=lambda kv: -kv[1]))
    )
    print(f"  replies checked: {single['ok'] + loaded['ok']} ok, {len(single['errors']) + len(loaded['errors'])} wrong")
    for e in (single["errors"] + loaded["errors"])[:5]:
        print("   ", e)
    if kind != "proxy":
        return
    server_lat = [c["latency_s"] for recs in report["sessions"].values() for c in recs]
    print(
        f"  in-proxy time (arrival to last byte, from captures): p50 {statistics.median(server_lat) * 1e3:.2f} ms, "
        f"p99 {_pct(server_lat, 99) * 1e3:.2f} ms"
    )
    expected = {f"s{i}": (10 + 100 if i == 0 else 0) + args.calls for i in range(args.sessions)}
    lost = {s: expected[s] - len(recs) for s, recs in report["sessions"].items() if len(recs) != expected[s]}
    wrong = [
        (s, c["mark"])
        for s, recs in report["sessions"].items()
        for c in recs
        if c["mark"] is None or c["mark"].split(":")[0] != s[1:] or c["status"] != 200
    ]
    print(f"  captured records lost: {sum(lost.values())}, misattributed or failed: {len(wrong)}")


def _tito_cost() -> None:
    """CPU the proxy spends building exact prompt ids per call, replaying the golden captures.

    Full: every prefix rendered from scratch (what the proxy did before); incremental: windows
    from the longest prefix rendered before (clawgym_env/proxy/_render.py). Both must give the
    recorded ids, which is checked here too.
    """
    import gzip

    from transformers import AutoTokenizer

    from clawgym_env.capture.records import CallRecord
    from clawgym_env.models.smollm2 import default_model_path
    from clawgym_env.proxy._tito import PromptBuilder

    tok = AutoTokenizer.from_pretrained(default_model_path())
    golden = Path(__file__).resolve().parents[1] / "tests" / "golden"
    for harness in ("claude-code", "openclaw"):
        with gzip.open(golden / harness / "capture.jsonl.gz", "rt") as f:
            calls = [CallRecord.model_validate_json(line) for line in f]
        row = []
        for incremental in (False, True):
            times: list[float] = []
            cpu: list[float] = []
            total: list[float] = []
            for _ in range(3):  # three replays; the first call of each replay is a cold start
                pb = PromptBuilder(tok, incremental=incremental)
                for c in calls:
                    t0, c0 = time.perf_counter(), time.thread_time()
                    ids, _ = pb.build(c.messages, c.tools)
                    times.append(time.perf_counter() - t0)
                    cpu.append(time.thread_time() - c0)
                    if ids != c.prompt_ids:
                        print(f"  !! {harness} call {c.call_index}: prompt ids differ from the recorded ones")
                    pb.remember(c.messages, c.tools, ids, c.completion_ids, c.response)
                    total.append(time.perf_counter() - t0)
            later = [t for i, t in enumerate(times) if i % len(calls)]
            later_cpu = [t for i, t in enumerate(cpu) if i % len(calls)]
            later_total = [t for i, t in enumerate(total) if i % len(calls)]
            row.append(
                f"{'incremental' if incremental else 'full render'} median {statistics.median(later) * 1e3:.2f} ms, "
                f"p95 {_pct(later, 95) * 1e3:.2f} ms (CPU {statistics.median(later_cpu) * 1e3:.2f} ms; "
                f"with remember() {statistics.median(later_total) * 1e3:.2f} ms)"
            )
        print(
            f"  TITO prompt building, golden {harness} ({len(calls)} calls, "
            f"{len(calls[-1].prompt_ids or [])} prompt tokens at the end), calls 2..N, build(): " + "; ".join(row)
        )


def _proc_cpu(pid: int, task: str = "") -> float:
    fields = Path(f"/proc/{pid}{task}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of the server's event-loop thread and of its other threads (the capture thread)."""
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = "loop" if task.name == str(pid) else "other threads"
            out[name] = out.get(name, 0.0) + _proc_cpu(pid, f"/task/{task.name}")
        except FileNotFoundError:  # the thread ended meanwhile
            continue
    return out


if __name__ == "__main__":
    main()
