"""CPU cost of Claude Code's prompts on vLLM's CPU build, as seconds of the worker's own CPU time.

Wall time on a shared box says little (the worker is pinned to one core that others share); the
worker process's CPU time does not depend on the load much. For the first prompt of a capture
(a ``clawgym bench run`` captures/*.jsonl, e.g. Claude Code's), it measures: a fresh prefill (its
first token changed, so nothing is in the prefix cache), the same prompt again (prefix-cached),
and that cached prompt plus ``--decode`` sampled tokens.

    python bench/vllm_cpu.py CAPTURE.jsonl [--url http://127.0.0.1:PORT --server-pid PID] [--decode 100]

Without ``--url`` it starts a server through ``launch_vllm_server`` (the tier's flags) and stops it
after. Prints figures; never asserts (bench/ is not a test tier).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import time
import urllib.request
from pathlib import Path


def worker_pid(server_pid: int) -> int:
    """The ``VLLM::Worker`` process in the server's process group (the launcher starts a new session)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            name, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
            if name.startswith("VLLM::Worker") and int(rest[2]) == server_pid:
                return int(entry.name)
    raise SystemExit(f"no VLLM::Worker process in process group {server_pid}")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def complete(url: str, model: str, ids: list[int], max_tokens: int) -> dict:
    body = {"model": model, "prompt": ids, "max_tokens": max_tokens, "temperature": 1.0, "seed": 0, "logprobs": 0, "ignore_eos": True}
    request = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=3600) as resp:
        return json.load(resp)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("capture", type=Path)
    ap.add_argument("--url")
    ap.add_argument("--server-pid", type=int, help="the server's pid (= its process group), with --url")
    ap.add_argument("--decode", type=int, default=100)
    ap.add_argument("--context", type=int, default=16384)
    args = ap.parse_args()
    from clawgym_env.models.smollm2 import default_model_path

    model = str(default_model_path())
    from clawgym_env.capture import read_capture

    first = read_capture(args.capture)[0].prompt_ids or []
    ids = [first[0] + 1, *first[1:]]  # a prompt not in the prefix cache
    server = None
    if args.url is None:
        from clawgym_env.proxy.backends.vllm_server import launch_vllm_server

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        t = time.monotonic()
        server = launch_vllm_server(model, port, ["--max-model-len", str(args.context)], env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"})
        server.wait_ready(1800)
        print(f"server start: {time.monotonic() - t:.0f} s wall")
        url, pid = server.base_url, server.process.pid
    else:
        url, pid = args.url.rstrip("/"), args.server_pid
    try:
        worker = worker_pid(pid)
        for label, max_tokens in (("fresh prefill", 1), ("cached prefill", 1), (f"cached + {args.decode} decoded", args.decode)):
            c0, t0 = cpu_seconds(worker), time.monotonic()
            out = complete(url, model, ids, max_tokens)
            print(
                f"{label:>24}: {len(ids)} prompt tokens, {out['usage']['completion_tokens']} out, worker CPU "
                f"{cpu_seconds(worker) - c0:.1f} s, wall {time.monotonic() - t0:.1f} s, load {os.getloadavg()[0]:.1f}"
            )
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
