"""Leftovers of processes that died without closing their sandboxes are removed; live ones stay."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from clawgym_env.sandbox._cgroup import detect
from clawgym_env.sandbox._sweep import owner_tag, sweep_cgroups, sweep_folders, sweep_temp, tagged_tempdir


def _dead_tag() -> str:
    """The tag of a process that has exited."""
    r = subprocess.run(
        [sys.executable, "-c", "from clawgym_env.sandbox._sweep import owner_tag; print(owner_tag())"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return r.stdout.strip()


def test_sweep_folders_removes_only_dead_owners(tmp_path: Path) -> None:
    dead = tmp_path / f"clawgym-bwrap-{_dead_tag()}-abc"
    (dead / "upper" / "work").mkdir(parents=True)
    (dead / "upper" / "work").chmod(0)  # like overlayfs leaves it
    live = tmp_path / f"clawgym-bwrap-{owner_tag()}-def"
    live.mkdir()
    untagged = tmp_path / "clawgym-bwrap-xyz"
    untagged.mkdir()
    assert sweep_folders(tmp_path) == 1
    assert not dead.exists() and live.exists() and untagged.exists()


def test_sweep_removes_folders_nested_past_pythons_recursion_limit(tmp_path: Path) -> None:
    """A dead sandbox's folder holding 3,000 nested folders (an agent's) goes too; it raised RecursionError,
    which failed every later sandbox start."""
    dead = tmp_path / f"clawgym-bwrap-{_dead_tag()}-abc"
    (dead / "upper").mkdir(parents=True)
    nest = "import os, sys\nos.chdir(sys.argv[1])\nfor _ in range(3000):\n    os.mkdir('a'); os.chdir('a')"
    try:
        subprocess.run([sys.executable, "-c", nest, str(dead / "upper")], check=True)
        assert sweep_folders(tmp_path) == 1 and not dead.exists()
    finally:  # pytest's own clean-up of old tmp_paths walks them recursively too
        subprocess.run(["rm", "-rf", str(dead)])


def test_sweep_cgroups_removes_only_dead_owners() -> None:
    info = detect()
    parents = sorted(set(info.parents.values())) if info is not None else []
    if not parents:
        return  # nothing to sweep on a machine without writable cgroups
    dead = parents[0] / f"clawgym-{_dead_tag()}-0001"
    live = parents[0] / f"clawgym-{owner_tag()}-0002"
    dead.mkdir()
    live.mkdir()
    try:
        assert sweep_cgroups(parents) >= 1
        assert not dead.exists() and live.exists()
    finally:
        for d in (dead, live):
            if d.exists():
                d.rmdir()


def test_temp_folders_of_dead_runs_go_and_live_ones_stay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A killed run's proxy-socket folder and final workspace go; this (live) process's temp folder, and
    folders of kinds the sweep does not own, stay."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with tagged_tempdir("read") as live:
        assert Path(live).parent == tmp_path and Path(live).name.startswith(f"clawgym-read-{owner_tag()}-")
        dead_tag = _dead_tag()
        dead = [tmp_path / f"clawgym-run-{dead_tag}-abc", tmp_path / f"clawgym-final-{dead_tag}-def"]
        (dead[0] / "proxy.sock").parent.mkdir()
        (dead[0] / "proxy.sock").touch()
        (dead[1] / "workspace" / "ro").mkdir(parents=True)
        (dead[1] / "workspace" / "ro" / "notes.md").touch()
        (dead[1] / "workspace" / "ro").chmod(0o500)  # an agent's read-only folder, copied out
        other = tmp_path / f"clawgym-rollouts-{dead_tag}-ghi"
        other.mkdir()
        assert sweep_temp() == 2
        assert not any(d.exists() for d in dead) and Path(live).is_dir() and other.is_dir()
