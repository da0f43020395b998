"""Spare launchers (``_bwrap_spare``): a sandbox's first exec is started by a shell already in its cgroup.

What must hold as from an exec moved in while held: the command is born inside the sandbox's cgroup under
its limits, with exactly the environment asked for, its stdin as asked, and no descriptor of the launcher;
a launcher that cannot join its cgroup runs nothing; an unused one leaves nothing once its sandbox closes."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest

from clawgym_env.sandbox import SandboxConfig, create_sandbox
from clawgym_env.sandbox import _bwrap_spare as spares
from clawgym_env.sandbox._cgroup import controllers_for, detect

pytestmark = pytest.mark.sandbox

_CFG = {"memory_mb": 256, "pids": 40}


@pytest.fixture
def info():
    found = detect()
    if found is None:
        pytest.skip("no writable cgroup on this machine: no spare launchers (each exec is moved in while held)")
    return found


async def _sandbox_with_spare(info, **fields: object):
    """A started sandbox that took a spare (made first, and waited for)."""
    key = controllers_for(info, _CFG["memory_mb"], _CFG["pids"], None)
    spares.replenish(info, key)
    for _ in range(10_000):
        if spares._pool[0].ready.get(key):
            break
        await asyncio.sleep(0.001)
    sb = create_sandbox("bwrap", SandboxConfig(**{**_CFG, **fields}))  # type: ignore[arg-type]
    await sb.start()
    assert sb._spare is not None, "no spare was taken"
    return sb


async def _born_inside(sb) -> bool:
    """Whether an exec's command is in the sandbox's cgroup (seen from the host: inside, its own cgroup
    namespace shows it at "/")."""
    marker = f"inside-{os.urandom(4).hex()}"
    started = await sb.spawn(["python3", "-c", f"import sys; sys.stdin.read()  # {marker}"])
    try:
        return any(marker.encode() in _cmdline(str(p)) for p in sb._cg.pids_inside())
    finally:
        await started.finish(b"", 30)


_REPORT = (
    "import json, os\nn = 0\npids = []\nfor _ in range(100):\n try:\n  pid = os.fork()\n except OSError:\n  break\n"
    " if pid == 0:\n  import time; time.sleep(3); os._exit(0)\n n += 1\n"
    "print(json.dumps({'env': dict(os.environ), 'fds': sorted(os.listdir('/proc/self/fd')),"
    " 'forked': n}))"
)


async def test_first_exec_from_a_spare_is_born_inside_with_its_env_and_no_stray_descriptor(info) -> None:
    sb = await _sandbox_with_spare(info)
    try:
        odd = "a b'c\"\n$HOME `x` \\ end"
        r = await sb.exec(["python3", "-c", _REPORT], env={"ODD": odd, "PWDX": "1"}, timeout=60)
        out = json.loads(r.stdout)
        assert out["forked"] < _CFG["pids"]  # the sandbox's pids limit, from its very first process
        assert r.killed_by_limit == "pids"  # counted in its cgroup
        assert out["env"]["ODD"] == odd
        assert out["fds"] == ["0", "1", "2", "3"]  # 3: listdir's own
        held = await sb.exec(["python3", "-c", _REPORT], env={"ODD": odd, "PWDX": "1"}, timeout=60)
        assert json.loads(held.stdout)["env"] == out["env"]  # as from an exec moved in while held (bwrap sets PWD)
        assert await _born_inside(sb)  # not from a spare either
    finally:
        await sb.close()
    assert not any(d.exists() for d in sb._cg.dirs.values()) if sb._cg is not None else True


async def test_an_exec_from_a_spare_outlives_the_making_of_more(info, monkeypatch) -> None:
    """bwrap's --die-with-parent fires when the *thread* that started it ends: the thread making spares must
    outlive every exec of theirs (a filler thread that ended once the pool was full killed them: -9)."""
    made = spares.Spare.__init__

    def slowly(self, *args) -> None:  # the pool is still being filled while the exec runs, then is full
        made(self, *args)
        time.sleep(0.05)

    spares.drop_spares()
    monkeypatch.setattr(spares.Spare, "__init__", slowly)
    monkeypatch.setattr(spares, "SPARES", 8)
    sb = await _sandbox_with_spare(info)  # taken once one is ready
    try:
        r = await sb.exec(["sh", "-c", "sleep 1.2; echo alive"], timeout=30)
        assert (r.return_code, r.stdout) == (0, "alive\n"), r
    finally:
        await sb.close()
        spares.drop_spares()


async def test_stdin_of_an_exec_from_a_spare(info) -> None:
    sb = await _sandbox_with_spare(info)
    try:  # the command's input, all of it, and never read by the launcher's shell
        r = await sb.exec(["cat"], stdin=b"echo NOT-RUN-BY-THE-LAUNCHER\n" * 5000)
        assert r.stdout == "echo NOT-RUN-BY-THE-LAUNCHER\n" * 5000, r.stderr
    finally:
        await sb.close()
    sb = await _sandbox_with_spare(info)
    try:
        r = await sb.exec(["sh", "-c", "cat; echo done"])  # no stdin given: /dev/null, at EOF at once
        assert r.stdout == "done\n"
    finally:
        await sb.close()


async def test_an_unused_spare_leaves_nothing_once_its_sandbox_closes(info) -> None:
    sb = await _sandbox_with_spare(info)
    assert await _born_inside(sb)  # from the spare
    sb = await _sandbox_with_spare(info)
    pid = sb._spare.popen.pid
    dirs = list(sb._cg.dirs.values())
    await sb.close()
    assert not os.path.exists(f"/proc/{pid}") or "zombie" in open(f"/proc/{pid}/status").read().lower()
    assert not any(d.exists() for d in dirs)


async def test_an_environment_a_shell_cannot_export_is_moved_in_while_held(info) -> None:
    sb = await _sandbox_with_spare(info)
    try:
        r = await sb.exec(["python3", "-c", "import os; print(os.environ['A-B'])"], env={"A-B": "kept"})
        assert r.stdout.strip() == "kept"
        assert sb._spare is not None  # left for a later exec: this one was moved in while held
        assert await _born_inside(sb)
    finally:
        await sb.close()


class _Unjoinable:
    """A cgroup whose cgroup.procs cannot be written (a folder there)."""

    def __init__(self, d: Path) -> None:
        (d / "cgroup.procs").mkdir(parents=True)
        self.dirs = {"pids": d}
        self.destroyed = False

    def destroy(self) -> None:
        self.destroyed = True


def test_a_launcher_that_cannot_join_its_cgroup_runs_nothing(info, tmp_path: Path, monkeypatch) -> None:
    fake = _Unjoinable(tmp_path / "cg")
    monkeypatch.setattr(spares.SandboxCgroup, "unlimited", classmethod(lambda cls, i, c: fake))
    before = {p for p in os.listdir("/proc") if p.isdigit()}
    t0 = time.monotonic()
    with pytest.raises(OSError, match="could not join its cgroup"):
        spares.Spare(info, frozenset({"pids"}))
    assert time.monotonic() - t0 < 10
    assert fake.destroyed
    left = [p for p in os.listdir("/proc") if p.isdigit() and p not in before]
    assert not [p for p in left if b"exit 125" in _cmdline(p)]


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
