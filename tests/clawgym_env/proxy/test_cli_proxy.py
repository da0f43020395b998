"""`clawgym proxy serve` serves a scripted policy until SIGTERM; `clawgym proxy inspect` summarises a capture."""

from __future__ import annotations

import signal
import subprocess
import sys

import httpx
from typer.testing import CliRunner

from clawgym_env.cli.main import app


def test_serve_then_inspect(tmp_path) -> None:
    script = tmp_path / "s.yaml"
    script.write_text("replies:\n  - tool_calls: [{name: Write, arguments: {file_path: a.txt, content: hi}}]\ndefault: done\n")
    cap = tmp_path / "cap.jsonl"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "clawgym_env.cli.main",
            "proxy",
            "serve",
            "--model",
            f"scripted:{script}",
            "--port",
            "0",
            "--api-key",
            "k-test",
            "--capture",
            str(cap),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url = None
        for line in proc.stdout:
            if "ANTHROPIC_BASE_URL=" in line:
                url = line.strip().split("=", 1)[1]
            if "API key:" in line:
                break
        assert url and url.startswith("http://127.0.0.1:")
        r = httpx.post(
            f"{url}/v1/chat/completions",
            headers={"authorization": "Bearer k-test"},
            json={"model": "m", "messages": [{"role": "user", "content": "go"}]},
            timeout=30,
        )
        assert r.status_code == 200 and r.json()["choices"][0]["finish_reason"] == "tool_calls"
        proc.send_signal(signal.SIGTERM)
        out = proc.stdout.read()
        assert proc.wait(timeout=30) == 0 and "served 1 calls" in out
    finally:
        if proc.poll() is None:
            proc.kill()
    res = CliRunner().invoke(app, ["proxy", "inspect", str(cap)])
    assert res.exit_code == 0, res.output
    assert "openai-chat" in res.output and "tool_calls" in res.output and "1 calls" in res.output


def test_bad_inputs_give_one_error_line_not_a_traceback(tmp_path) -> None:
    import socket

    runner = CliRunner()
    res = runner.invoke(app, ["proxy", "inspect", str(tmp_path / "missing.jsonl")])
    assert res.exit_code == 2 and res.output.startswith("error: capture file") and "Traceback" not in res.output
    (tmp_path / "bad.jsonl").write_text("{bad\n")
    res = runner.invoke(app, ["proxy", "inspect", str(tmp_path / "bad.jsonl")])
    assert res.exit_code == 2 and "not a valid CallRecord" in res.output and len(res.output.splitlines()) == 1
    res = runner.invoke(app, ["proxy", "serve", "--model", "foo:bar"])
    assert res.exit_code == 2 and res.output.startswith("error: --model 'foo:bar': unknown kind")
    script = tmp_path / "s.yaml"
    script.write_text("default: done\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = runner.invoke(app, ["proxy", "serve", "--model", f"scripted:{script}", "--port", str(port)])
    assert res.exit_code == 2 and f"cannot listen on 127.0.0.1:{port}" in res.output and "--port" in res.output
