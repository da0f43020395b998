"""Issue 3 "Done when": every escape attempt fails and the host is unchanged (bwrap and docker)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from clawgym_env.errors import SandboxExecError
from clawgym_env.sandbox._cgroup import detect

from .conftest import processes_with, wait_for_daemon


async def test_cannot_read_host_file_outside_workspace(make, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET-7f3a")
    ws = tmp_path / "ws"
    ws.mkdir()
    sb = await make(workspace_src=ws)
    r = await sb.exec(["sh", "-c", f"cat {secret}; ls {tmp_path}; cat /etc/shadow; grep -rs TOPSECRET-7f3a /tmp /home /run"])
    assert "TOPSECRET-7f3a" not in r.stdout
    assert r.return_code != 0


async def test_cannot_write_outside_workspace(make, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    sb = await make(workspace_src=ws)
    marker = f"pwned-{uuid.uuid4().hex[:8]}"
    targets = [tmp_path / marker, Path("/usr") / marker, Path("/etc") / marker, Path("/tmp") / marker]
    script = "; ".join(f"echo x > {t}" for t in targets)
    await sb.exec(["sh", "-c", script])
    for t in targets:
        assert not t.exists(), t


async def test_cannot_reach_host_loopback_port(make, tmp_path: Path) -> None:
    hits: list[int] = []

    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        hits.append(1)
        w.close()

    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        sb = await make()
        probe = (
            "import socket,sys\n"
            f"s=socket.socket(); s.settimeout(2)\n"
            f"try:\n s.connect(('127.0.0.1',{port})); print('CONNECTED')\n"
            "except OSError as e:\n print('refused', e)\n"
        )
        r = await sb.exec(["python3", "-c", probe], timeout=20)
        assert "CONNECTED" not in r.stdout
        assert "refused" in r.stdout
        assert hits == []
    finally:
        server.close()


async def test_cannot_reach_another_sandboxes_workspace(make, tmp_path: Path) -> None:
    a = await make()
    b = await make()
    await a.exec(["sh", "-c", "echo OTHER-SANDBOX-9c1 > mine.txt"])
    a_host = getattr(a, "dir", None) or "/nonexistent"
    r = await b.exec(["sh", "-c", f"cat mine.txt {a_host}/upper/mine.txt; grep -rs OTHER-SANDBOX-9c1 /tmp /home /run"])
    assert "OTHER-SANDBOX-9c1" not in r.stdout
    back = tmp_path / "back.txt"
    await a.download("mine.txt", back)
    assert back.read_text().strip() == "OTHER-SANDBOX-9c1"


async def test_hidden_verifier_files_unreadable_until_uploaded(make, backend: str, tmp_path: Path) -> None:
    verifier = tmp_path / "verifier"
    verifier.mkdir()
    (verifier / "expected.txt").write_text("HIDDEN-ANSWER-42")
    sb = await make()
    top = "/verifier" if backend == "bwrap" else "/tmp/verifier"  # docker: read-only root, no new top-level folders
    before = await sb.exec(["sh", "-c", f"cat {verifier}/expected.txt {top}/expected.txt"])
    assert "HIDDEN-ANSWER-42" not in before.stdout
    await sb.upload(verifier, top)
    after = await sb.exec(["cat", f"{top}/expected.txt"])
    assert after.stdout == "HIDDEN-ANSWER-42"


def _host_spawn_seconds() -> float:
    t0 = time.perf_counter()
    subprocess.run(["true"], check=True)
    return time.perf_counter() - t0


async def test_fork_bomb_is_contained(make) -> None:
    sb = await make(pids=32, memory_mb=256)
    if sb.name == "bwrap" and detect() is None and os.geteuid() == 0:
        # Host root without a writable cgroup: nothing can cap the bomb (RLIMIT_NPROC exempts
        # root), so don't set one off on this machine; the doctor must say limits are off.
        from clawgym_env.sandbox.doctor import check_bwrap

        row = next(c for c in check_bwrap() if c.item == "resource limits")
        assert row.status == "warn" and "NOT enforced" in row.detail
        return
    bomb = asyncio.create_task(sb.exec(["sh", "-c", "b(){ b | b & }; b; sleep 30"], timeout=4))
    await asyncio.sleep(1.5)
    spawn = await asyncio.to_thread(_host_spawn_seconds)
    r = await bomb
    assert spawn < 5.0, f"host took {spawn:.2f}s to start a process during the bomb"
    assert r.timed_out or r.killed_by_limit == "pids"
    if detect() is not None or sb.name == "docker":
        # with a pids limit the bomb never got past 32 processes
        count = await sb.exec(["python3", "-c", "import os\nn=0\nfor _ in range(100):\n try:\n  pid=os.fork()\n except OSError:\n  break\n if pid==0:\n  import time; time.sleep(5); os._exit(0)\n n+=1\nprint(n)"], timeout=20)  # fmt: skip
        assert int(count.stdout.strip()) < 32


async def test_memory_bomb_is_contained(make) -> None:
    sb = await make(memory_mb=64)
    if sb.name == "bwrap" and detect() is None:
        # No writable cgroup here: the limit cannot be enforced, and doctor must say so.
        from clawgym_env.sandbox.doctor import check_bwrap

        row = next(c for c in check_bwrap() if c.item == "resource limits")
        assert row.status == "warn" and "NOT enforced" in row.detail
        return
    r = await sb.exec(["python3", "-c", "b = b'x' * (768 << 20); print('ALLOCATED')"], timeout=60)
    assert "ALLOCATED" not in r.stdout
    assert r.return_code != 0
    assert r.killed_by_limit == "memory"
    ok = await sb.exec(["echo", "alive"])
    assert ok.stdout.strip() == "alive"


async def test_sigterm_ignoring_double_fork_is_killed_at_close(make) -> None:
    sb = await make()
    marker = f"clawgym-zombie-{uuid.uuid4().hex[:8]}"
    daemon = f"trap '' TERM HUP INT; exec -a {marker} sleep 300"
    script = f'(setsid sh -c "{daemon}" &) ; sleep 300'
    running = asyncio.create_task(sb.exec(["sh", "-c", script], timeout=120))
    await wait_for_daemon(marker)
    await sb.close()
    await asyncio.wait_for(running, 10)
    await asyncio.sleep(0.2)
    assert processes_with(marker) == []


async def test_double_fork_dies_with_its_exec(make) -> None:
    sb = await make()
    marker = f"clawgym-orphan-{uuid.uuid4().hex[:8]}"
    await sb.exec(["sh", "-c", f"(setsid sh -c \"trap '' TERM; exec -a {marker} sleep 300\" &); sleep 0.3"])
    await asyncio.sleep(0.2)
    assert processes_with(marker) == []


async def test_close_leaves_nothing_behind(make) -> None:
    sb = await make(memory_mb=128, pids=64)
    await sb.exec(["sh", "-c", "echo hi > f.txt; mkdir -p d/e; echo y > /tmp/t"])
    await sb.upload(Path(__file__), "/tmp/verifier/t.py")
    host_dir = getattr(sb, "dir", None)
    cg = getattr(sb, "_cg", None)
    cg_dirs = list(cg.dirs.values()) if cg is not None else []
    container = getattr(sb, "_container", None)
    await sb.close()
    await sb.close()  # idempotent
    if host_dir is not None:
        assert not Path(host_dir).exists()
        assert str(host_dir) not in Path("/proc/self/mountinfo").read_text()
    for d in cg_dirs:
        assert not d.exists()
    if container is not None:
        import docker

        with pytest.raises(docker.errors.NotFound):
            docker.from_env().containers.get(container.id)


async def test_cancelled_exec_kills_its_process_tree(make) -> None:
    sb = await make()
    marker = f"clawgym-cancel-{uuid.uuid4().hex[:8]}"
    task = asyncio.create_task(sb.exec(["sh", "-c", f"(setsid sh -c \"trap '' TERM; exec -a {marker} sleep 300\" &); sleep 300"]))
    await wait_for_daemon(marker)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.3)
    assert processes_with(marker) == []
    assert (await sb.exec(["echo", "still usable"])).stdout.strip() == "still usable"


async def test_uploads_never_follow_links_the_agent_planted(make, tmp_path: Path) -> None:
    """bwrap copies config files host-side only while nothing has run inside; after that, an upload
    through a link the agent left in HOME or /tmp lands inside the sandbox, never on the host."""
    victim = tmp_path / "victim"
    victim.mkdir()
    src = tmp_path / "cfg.json"
    src.write_text("CONFIG-5c1e")
    sb = await make()
    await sb.upload(src, "/tmp/home/.config/first.json")  # before any exec (bwrap: host-side copy)
    r = await sb.exec(
        ["sh", "-c", f"cat /tmp/home/.config/first.json; ln -s {victim} /tmp/home/link; ln -s {victim}/f.json /tmp/home/flink"]
    )
    assert r.stdout == "CONFIG-5c1e"
    for dest in ("/tmp/home/link/f.json", "/tmp/home/flink"):
        with contextlib.suppress(SandboxExecError):  # refused inside the sandbox is fine too
            await sb.upload(src, dest)
    assert list(victim.iterdir()) == []
