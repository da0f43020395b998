"""What every backend must do: the proxy bridge, copy-on-write workspace, files, timeouts, output."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from clawgym_env.errors import SandboxExecError

_GET = "import urllib.request,sys\nprint(urllib.request.urlopen('http://127.0.0.1:%d/v1/ping', timeout=10).read().decode())\n"


async def _unix_http_server(path: Path, seen: list[bytes]) -> asyncio.AbstractServer:
    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        head = await r.readuntil(b"\r\n\r\n")
        seen.append(head.split(b"\r\n", 1)[0])
        body = b"pong-from-host"
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
        await w.drain()
        w.close()

    return await asyncio.start_unix_server(handle, str(path))


async def test_proxy_socket_bridge_reaches_host_unix_socket(make, tmp_path: Path) -> None:
    sock, seen = tmp_path / "proxy.sock", []
    server = await _unix_http_server(sock, seen)
    try:
        sb = await make(proxy_socket=sock, proxy_port=18787)
        r = await sb.exec(["python3", "-c", _GET % 18787], timeout=30)
        assert r.stdout.strip() == "pong-from-host", r.stderr
        assert seen == [b"GET /v1/ping HTTP/1.1"]
        again = await sb.exec(["python3", "-c", _GET % 18787], timeout=30)  # every exec gets the bridge
        assert again.stdout.strip() == "pong-from-host"
    finally:
        server.close()


async def test_without_proxy_socket_nothing_listens(make) -> None:
    sb = await make()
    r = await sb.exec(["python3", "-c", _GET % 8787], timeout=30)
    assert r.return_code != 0
    assert "Connection refused" in r.stderr or "URLError" in r.stderr


async def test_overlay_leaves_workspace_src_untouched(make, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "keep.txt").write_text("original")
    (src / "gone.txt").write_text("delete me")
    (src / "sub" / "x.txt").write_text("x")
    sb = await make(workspace_src=src)
    r = await sb.exec(["sh", "-c", "echo changed > keep.txt && rm gone.txt && rm -r sub && echo n > new.txt && ls"])
    assert r.return_code == 0, r.stderr
    assert sorted(r.stdout.split()) == ["keep.txt", "new.txt"]
    assert (src / "keep.txt").read_text() == "original"
    assert (src / "gone.txt").exists() and (src / "sub" / "x.txt").exists()
    assert not (src / "new.txt").exists()
    out = tmp_path / "out"
    await sb.download(".", out)
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt", "new.txt"]
    assert (out / "keep.txt").read_text() == "changed\n"


async def test_workspace_persists_across_exec_calls(make) -> None:
    sb = await make(workspace_mount="/root/.openclaw/workspace")
    await sb.exec(["sh", "-c", "echo 1 > a && echo home > ~/h && echo t > /tmp/t"])
    r = await sb.exec(["sh", "-c", "pwd; cat a ~/h /tmp/t"])
    assert r.stdout.split() == ["/root/.openclaw/workspace", "1", "home", "t"]


async def test_upload_and_download_files_and_folders(make, backend: str, tmp_path: Path) -> None:
    sb = await make()
    f = tmp_path / "one.txt"
    f.write_text("one")
    d = tmp_path / "tree"
    (d / "deep").mkdir(parents=True)
    (d / "deep" / "two.txt").write_text("two")
    await sb.upload(f, "in/one.txt")
    top = "/verifier" if backend == "bwrap" else "/tmp/verifier"  # docker: read-only root, no new top-level folders
    await sb.upload(d, f"{top}/tree")
    r = await sb.exec(["sh", "-c", f"cat in/one.txt {top}/tree/deep/two.txt"])
    assert r.stdout == "onetwo"
    await sb.exec(["sh", "-c", f"echo made > {top}/tree/deep/three.txt"])
    back = tmp_path / "back"
    await sb.download(f"{top}/tree", back)
    assert sorted(p.name for p in (back / "deep").iterdir()) == ["three.txt", "two.txt"]
    single = tmp_path / "single.txt"
    await sb.download("in/one.txt", single)
    assert single.read_text() == "one"
    with pytest.raises(SandboxExecError):
        await sb.download("missing.txt", tmp_path / "nope")
    with pytest.raises(SandboxExecError):
        await sb.upload(f, "/usr/bin/evil")


async def test_download_drops_symlinks_leading_out(make, tmp_path: Path) -> None:
    sb = await make()
    await sb.exec(["sh", "-c", "mkdir w && echo ok > w/real && ln -s /etc/passwd w/evil && ln -s real w/fine"])
    out = tmp_path / "w"
    await sb.download("w", out)
    assert (out / "real").read_text() == "ok\n"
    assert (out / "fine").is_symlink()
    assert not (out / "evil").exists() and not (out / "evil").is_symlink()


async def test_reaped_workspace_comes_out_clean(make, tmp_path: Path) -> None:
    """The whole workspace after ``reap`` (how an episode's final workspace is taken, host-side on docker):
    links leading out, special files and setuid bits stay behind, unreadable files still come out."""
    sb = await make()
    await sb.exec(
        [
            "sh",
            "-c",
            "echo ok > real && ln -s /etc/passwd evil && ln -s ../../../ up && ln -s real fine && "
            "mkfifo pipe && cp /bin/sh suid && chmod 4755 suid && mkdir d && echo s > d/secret && chmod 000 d/secret",
        ]
    )
    await sb.reap()
    out = tmp_path / "ws"
    skipped = await sb.download(sb.config.workspace_mount, out)
    assert (out / "real").read_text() == "ok\n" and (out / "fine").is_symlink() and (out / "d" / "secret").exists()
    assert not any((out / n).exists() or (out / n).is_symlink() for n in ("evil", "up", "pipe"))
    assert "pipe" in skipped and not (out / "suid").stat().st_mode & 0o6000


async def test_a_workspace_filling_the_memory_limit_still_comes_out(make, tmp_path: Path) -> None:
    """An agent's workspace files count against its memory limit (tmpfs pages, both backends). Filled to
    the limit, the final workspace must still come out after ``reap``: a copy that ran in the agent's
    cgroup was killed, and the agent had turned its failed episode into an infrastructure error."""
    sb = await make(memory_mb=96)
    await sb.exec(["sh", "-c", "echo kept > small; head -c 160M /dev/zero > big"])
    await sb.reap()
    for attempt in range(3):
        out = tmp_path / f"ws{attempt}"
        await sb.download(sb.config.workspace_mount, out)
        assert (out / "small").read_text() == "kept\n" and (out / "big").exists()


async def test_timeout_kills_and_reports(make) -> None:
    sb = await make(wall_time_s=0.5)
    t0 = time.perf_counter()
    r = await sb.exec(["sh", "-c", "echo started; sleep 30"])
    assert r.timed_out and r.killed_by_limit == "wall_time"
    assert r.stdout.strip() == "started"
    assert time.perf_counter() - t0 < 10
    quick = await sb.exec(["sh", "-c", "sleep 1; echo done"], timeout=20)  # per-call override
    assert not quick.timed_out and quick.stdout.strip() == "done"


async def test_streaming_output_arrives_while_running(make) -> None:
    sb = await make()
    chunks: list[tuple[str, bytes, float]] = []

    async def on_output(stream: str, data: bytes) -> None:
        chunks.append((stream, data, time.perf_counter()))

    t0 = time.perf_counter()
    r = await sb.exec(["sh", "-c", "echo first; sleep 1; echo second >&2; echo third"], on_output=on_output)
    end = time.perf_counter()
    first = next(t for s, d, t in chunks if b"first" in d)
    assert end - first > 0.7, "first line was not streamed before the process ended"
    assert b"".join(d for s, d, _ in chunks if s == "stdout") == b"first\nthird\n"
    assert b"".join(d for s, d, _ in chunks if s == "stderr") == b"second\n"
    assert r.stdout == "first\nthird\n" and r.stderr == "second\n"
    assert end - t0 < 15


async def test_output_is_capped(make) -> None:
    sb = await make()
    r = await sb.exec(["sh", "-c", "head -c 5000000 /dev/zero | tr '\\0' a"], max_output_bytes=1000)
    assert r.return_code == 0
    assert r.stdout.startswith("a" * 1000)
    assert "output truncated, 4999000 bytes dropped" in r.stdout


async def test_stdin_env_and_cwd(make) -> None:
    sb = await make(env={"FROM_CONFIG": "c"})
    r = await sb.exec(["sh", "-c", "cat; echo $FROM_CONFIG $FROM_CALL; pwd"], stdin=b"in\n", env={"FROM_CALL": "x"}, cwd="/tmp")
    assert r.stdout == "in\nc x\n/tmp\n"


async def test_unprivileged_user_inside(make) -> None:
    sb = await make(user="user")
    r = await sb.exec(["sh", "-c", "id -u; echo $HOME; echo w > f && cat f; touch /root/x 2>/dev/null || echo denied"])
    assert r.stdout.split() == ["1000", "/home/user", "w", "denied"]


async def test_twenty_concurrent_sandboxes(make) -> None:
    sbs = await asyncio.gather(*(make() for _ in range(20)))
    results = await asyncio.gather(*(sb.exec(["sh", "-c", f"echo {i} > id && cat id"]) for i, sb in enumerate(sbs)))
    assert [r.stdout.strip() for r in results] == [str(i) for i in range(20)]


async def test_exec_after_close_is_an_error(make) -> None:
    sb = await make()
    await sb.close()
    with pytest.raises(SandboxExecError):
        await sb.exec(["true"])


async def test_concurrent_execs_share_one_workspace(make) -> None:
    sb = await make()
    slow = asyncio.create_task(sb.exec(["sh", "-c", "echo a > a.txt; sleep 1; cat b.txt"]))
    await asyncio.sleep(0.3)
    fast = await sb.exec(["sh", "-c", "echo b > b.txt; cat a.txt"])
    assert fast.stdout == "a\n"
    assert (await slow).stdout == "b\n"


@pytest.mark.sandbox
@pytest.mark.docker
async def test_bwrap_with_a_chosen_rootfs(tmp_path: Path) -> None:
    """SandboxConfig.rootfs: the clawgym base image's files instead of the host's system folders."""
    import io
    import tarfile

    import docker

    from clawgym_env.sandbox import SandboxConfig, create_sandbox

    client = docker.from_env()
    container = client.containers.create("clawgym-base:latest")
    try:
        data = b"".join(container.export())
    finally:
        container.remove(force=True)
    rootfs = tmp_path / "rootfs"
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(rootfs, filter="fully_trusted")
    async with create_sandbox("bwrap", SandboxConfig(rootfs=rootfs, user="user")) as sb:
        r = await sb.exec(["sh", "-c", "cat /etc/debian_version; id -un; python3 -c 'import sys; print(sys.prefix)'"])
    assert r.return_code == 0, r.stderr
    version, user, prefix = r.stdout.split()
    assert version == (rootfs / "etc" / "debian_version").read_text().strip()
    assert user == "user" and prefix == "/usr"


async def test_missing_command_exits_127(make, tmp_path: Path) -> None:
    sb = await make()
    r = await sb.exec(["no-such-program-xyz"])
    assert r.return_code == 127
    sock = tmp_path / "p.sock"
    server = await _unix_http_server(sock, [])
    try:
        bridged = await make(proxy_socket=sock)
        assert (await bridged.exec(["no-such-program-xyz"])).return_code == 127
    finally:
        server.close()
