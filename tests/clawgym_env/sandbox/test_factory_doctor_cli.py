"""create_sandbox's lazy table, the "none" backend, `clawgym sandbox doctor` and `run`."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clawgym_env.errors import ConfigError, SandboxExecError
from clawgym_env.sandbox import SandboxConfig, backend_class, create_sandbox
from clawgym_env.sandbox.bwrap import BwrapSandbox, probe_bwrap
from clawgym_env.sandbox.doctor import check_bwrap, doctor, usable_backends
from clawgym_env.sandbox.local import NoIsolationWarning

REPO = Path(__file__).resolve().parents[3]


def test_unknown_backend_suggests_the_closest() -> None:
    with pytest.raises(ConfigError, match="Did you mean 'bwrap'"):
        create_sandbox("bwarp", SandboxConfig())
    assert backend_class("bwrap") is BwrapSandbox


def test_docker_py_is_not_imported_unless_used() -> None:
    code = (
        "import sys, types\n"
        f"pkg = types.ModuleType('clawgym_env'); pkg.__path__ = [{str(REPO / 'clawgym_env')!r}]\n"
        "sys.modules['clawgym_env'] = pkg\n"
        "from clawgym_env.sandbox import create_sandbox, SandboxConfig\n"
        "create_sandbox('bwrap', SandboxConfig())\n"
        "print('docker' in sys.modules, 'clawgym_env.sandbox.docker' in sys.modules)\n"
        "create_sandbox('docker', SandboxConfig())  # not started: docker-py is imported at start()\n"
        "print('docker' in sys.modules, 'clawgym_env.sandbox.docker' in sys.modules)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.split() == ["False", "False", "False", "True"], r.stderr


def test_bad_user_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="SandboxConfig.user"):
        create_sandbox("bwrap", SandboxConfig(user="admin"))


async def test_none_backend_warns_and_runs_on_host(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("A")
    sock = tmp_path / "p.sock"

    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        await w.drain()
        w.close()

    server = await asyncio.start_unix_server(handle, str(sock))
    sb = create_sandbox("none", SandboxConfig(workspace_src=src, proxy_socket=sock, proxy_port=18799))
    with pytest.warns(NoIsolationWarning):
        await sb.start()
    try:
        r = await sb.exec(["sh", "-c", "cat a.txt; echo b > b.txt"])
        assert r.stdout == "A" and not (src / "b.txt").exists()
        get = "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:18799/').read().decode())"
        assert (await sb.exec([sys.executable, "-c", get], timeout=20)).stdout.strip() == "ok"
        await sb.upload(src / "a.txt", "/verifier/a.txt")
        out = tmp_path / "out"
        await sb.download("/verifier/a.txt", out)
        assert out.read_text() == "A"
        slow = await sb.exec(["sleep", "30"], timeout=0.3)
        assert slow.timed_out
        host_dir = sb.dir
    finally:
        await sb.close()
        server.close()
    assert host_dir is not None and not host_dir.exists()
    with pytest.raises(SandboxExecError):
        await sb.exec(["true"])


def test_doctor_reports_every_backend() -> None:
    checks = doctor()
    assert {c.backend for c in checks} == {"bwrap", "docker", "none"}
    assert all(c.fix for c in checks if c.status == "fail")
    assert "none" in usable_backends(checks)
    assert ("bwrap" in usable_backends(checks)) == probe_bwrap().ok


def test_doctor_explains_a_missing_bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAWGYM_BWRAP", "/nonexistent/bwrap")
    probe_bwrap.cache_clear()
    try:
        rows = check_bwrap()
    finally:
        monkeypatch.delenv("CLAWGYM_BWRAP")
        probe_bwrap.cache_clear()
    assert rows[0].status == "fail" and "CLAWGYM_BWRAP" in rows[0].detail and rows[0].fix


@pytest.mark.sandbox
def test_cli_run_streams_and_returns_the_exit_code(tmp_path: Path) -> None:
    from clawgym_env.cli.main import app

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "hello.txt").write_text("hello from the workspace")
    out = tmp_path / "after"
    r = CliRunner().invoke(
        app, ["sandbox", "run", "--workspace", str(ws), "--download", str(out), "--", "sh", "-c", "cat hello.txt; echo x > y; exit 3"]
    )  # fmt: skip
    assert r.exit_code == 3, r.output
    assert "hello from the workspace" in r.output
    assert sorted(p.name for p in out.iterdir()) == ["hello.txt", "y"]


def test_cli_run_bad_options_give_one_error_line(tmp_path: Path) -> None:
    from clawgym_env.cli.main import app

    for args, words in {
        ("--backend", "bwarp"): "sandbox backend 'bwarp' is unknown",
        ("--workspace", str(tmp_path / "missing")): "is not a folder",
        ("--user", "bob"): "'bob' is not one of",
    }.items():
        r = CliRunner().invoke(app, ["sandbox", "run", *args, "--", "true"], env={"COLUMNS": "300"})
        assert r.exit_code == 2 and r.output.startswith("error: ") and words in r.output, (args, r.output)
        assert r.exception is None or isinstance(r.exception, SystemExit), (args, r.exception)


@pytest.mark.sandbox
def test_cli_doctor_prints_a_table() -> None:
    from clawgym_env.cli.main import app

    r = CliRunner().invoke(app, ["sandbox", "doctor"])
    assert "clawgym sandbox doctor" in r.output and "usable backends" in r.output
    assert r.exit_code == (0 if probe_bwrap().ok else 1) or "docker" in r.output


def test_public_surface_is_pinned() -> None:
    import clawgym_env.sandbox as pkg

    assert pkg.__all__ == sorted(pkg.__all__)
    assert set(pkg.__all__) == {
        "BACKENDS", "DEFAULT_BACKEND", "ExecResult", "FinalLayers", "Mount", "OutputCallback", "Sandbox",
        "SandboxConfig", "SandboxState", "backend_class", "create_sandbox", "drop_spare_launchers",
    }  # fmt: skip
    assert pkg.DEFAULT_BACKEND == "bwrap" and set(pkg.BACKENDS) == {"bwrap", "docker", "none"}
