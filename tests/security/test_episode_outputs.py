"""What an episode leaves behind is kept safely: special files, setuid bits, permissions, disk,
and the system the verifier sees (the same as the agent's, no host interpreter)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.security.conftest import ORIGINAL, Attack, bash, saved_workspace

MAKE_SPECIALS = (
    "mkfifo pipe && python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('sock')\" && "
    "cp /bin/sh suid-sh && chmod 4755 suid-sh && cp /bin/sh sgid-sh && chmod 2755 sgid-sh && "
    "echo secret > mine.txt && chmod 644 mine.txt && mkdir -p open && chmod 777 open && ls -l"
)


async def test_special_files_and_setuid_bits_in_saved_workspaces(backend: str, attack: Attack) -> None:
    summary, rec = await attack(ORIGINAL, "smoke-hello-file-p0", [bash(MAKE_SPECIALS)], backend, save=True)
    assert summary.ran == 1 and rec.status in ("failed", "error") and rec.score == 0.0
    ws = saved_workspace(summary)
    names = {p.name for p in ws.iterdir()}
    assert {"suid-sh", "sgid-sh", "mine.txt", "open"} <= names and not {"pipe", "sock"} & names
    assert any("pipe" in n and "sock" in n and "left out" in n for n in rec.notes), rec.notes
    for p in [ws, *ws.rglob("*")]:
        mode = p.lstat().st_mode
        assert not mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX), p
        if not stat.S_ISLNK(mode):
            assert not mode & 0o077, f"{p} is readable by others: {oct(mode)}"


async def test_a_sparse_terabyte_stays_inside(backend: str, attack: Attack) -> None:
    """``truncate -s 1T`` costs nothing inside, but its full size in any copy out (the saved workspace, the
    copy docker grades): the file stays behind, noted, and the rest of the workspace comes out graded."""
    summary, rec = await attack(
        ORIGINAL,
        "smoke-hello-file-p0",
        [bash("echo hi > small; truncate -s 1T big; mkdir d; truncate -s 100M d/a; truncate -s 8G d/b")],
        backend,
        save=True,
    )
    assert rec.score == 0.0 and "verifier" not in (rec.error or ""), rec.error
    ws = saved_workspace(summary)
    assert (ws / "small").read_text() == "hi\n" and not (ws / "big").exists()
    assert (ws / "d" / "a").stat().st_size == 100 << 20 and not (ws / "d" / "b").exists()  # 8 GiB in all, path order
    assert any("big (over the disk limit)" in n and "d/b" in n for n in rec.notes), rec.notes


@pytest.mark.parametrize("save", [False, True], ids=["graded-in-place", "saved"])
async def test_folders_nested_past_pythons_recursion_limit_are_left_out(backend: str, attack: Attack, save: bool) -> None:
    """3,000 nested folders made every tree walk of ours (shutil, os.walk) raise RecursionError: the episode
    was an internal error, left out of training, and its folders, left on disk, broke every later sandbox
    start (the sweep of dead sandboxes walked them). Now they stay behind, noted, and the episode is graded."""
    nest = "python3 -c \"import os\nfor i in range(3000):\n    os.mkdir('a'); os.chdir('a')\nopen('x', 'w').write('x')\""
    summary, rec = await attack(ORIGINAL, "smoke-hello-file-p0", [bash(f"echo hi > small; {nest}")], backend, save=save)
    assert rec.status == "failed" and rec.error is None, (rec.status, rec.error)
    assert any("(deeper than 256 folders)" in n for n in rec.notes), rec.notes
    if save:
        ws = saved_workspace(summary)
        kept = ws.joinpath(*["a"] * 256)
        assert (ws / "small").read_text() == "hi\n" and kept.is_dir() and not (kept / "a").exists()
    summary, rec = await attack(ORIGINAL, "smoke-hello-file-p0", [bash("echo hello world > hello.txt")], backend)
    assert rec.status == "passed", rec.error  # nothing left behind breaks the next episode


async def test_names_that_are_not_utf8_do_not_stop_the_run(backend: str, attack: Attack) -> None:
    """A FIFO named b'p\\xff' went into the attempt's notes as a lone surrogate; the record could not be
    written as JSON and the whole run (bench or training) stopped on it."""
    made = "python3 -c \"import os; os.mkfifo(b'p\\xff'); open(b'f\\xfe', 'w').write('x')\""
    summary, rec = await attack(ORIGINAL, "smoke-hello-file-p0", [bash(made)], backend, save=True)
    assert rec.status == "failed" and any("p\\udcff" in n for n in rec.notes), rec.notes
    assert (saved_workspace(summary) / os.fsdecode(b"f\xfe")).read_text() == "x"


@pytest.mark.sandbox
@pytest.mark.docker
async def test_docker_disk_flood_stays_inside(attack: Attack) -> None:
    """A 3 GiB write is stopped inside (tmpfs pages count against the 1 GiB memory limit; which process the
    kernel then kills varies), and the episode still ends graded, its final workspace taken out."""
    flood = "dd if=/dev/zero of=big bs=1M count=3072 2>dd.err; echo rc=$? > dd.txt; du -m big | cut -f1 >> dd.txt; rm -f big; cat dd.txt"
    summary, rec = await attack(ORIGINAL, "smoke-hello-file-p0", [bash(flood)], "docker", save=True)
    assert summary.ran == 1 and rec.score == 0.0 and "verifier" not in (rec.error or ""), rec.error
    ws = saved_workspace(summary)
    big = ws / "big"
    assert not big.exists() or big.stat().st_size < 3072 << 20
    if (ws / "dd.txt").exists():
        lines = (ws / "dd.txt").read_text().split()
        written = int(lines[1]) if len(lines) > 1 else 0
        assert lines[0] != "rc=0" and written < 3072, (lines, rec.error)
    else:  # the shell went first
        assert "memory limit" in (rec.error or ""), rec.error


SEE = (
    "for c in python python3 pip; do command -v $c; done; python3 -I -c 'import sys; print(sys.executable, sys.prefix)'; "
    "python3 -I -c 'import numpy' 2>/dev/null && echo numpy || echo no-numpy; ls /root/.pyenv 2>&1; echo PATH=$PATH"
)


async def test_agent_and_verifier_see_the_same_system(backend: str, attack: Attack, tmp_path: Path) -> None:
    """The verifier runs the same python3 as the agent, from the same folders; the host's interpreter
    (here a pyenv under /root, with numpy, pandas and a `python` command) is visible to neither."""
    import sys

    from clawgym_env.grading import grade_workspace, make_transcript
    from clawgym_env.task import load_suite

    summary, _ = await attack(ORIGINAL, "smoke-hello-file-p0", [bash(f"({SEE}) > seen.txt 2>&1")], backend, save=True)
    agent = (saved_workspace(summary) / "seen.txt").read_text().splitlines()
    suite = tmp_path / "see"
    (suite / "t" / "hidden").mkdir(parents=True)
    (suite / "suite.yaml").write_text("name: see\n")
    (suite / "t" / "task.yaml").write_text(
        "id: t\ninstruction: look\nhidden: hidden\nverifiers:\n  - {kind: script, file: hidden/reward.sh}\n"
    )
    (suite / "t" / "hidden" / "reward.sh").write_text(f"({SEE}) 2>&1 | sed 's/^/seen: /'\necho 0\n")
    spec = load_suite(suite).get("t")
    res = await grade_workspace(spec, saved_workspace(summary), make_transcript(spec, "x"), backend)
    verifier = [ln[len("seen: ") :] for ln in res.output.splitlines() if ln.startswith("seen: ")]
    assert [ln for ln in verifier if not ln.startswith("PATH=")] == [ln for ln in agent if not ln.startswith("PATH=")]
    agent_path = next(ln for ln in agent if ln.startswith("PATH="))[5:].split(":")
    assert set(next(ln for ln in verifier if ln.startswith("PATH="))[5:].split(":")) <= set(agent_path)
    assert agent[0] == "/usr/bin/python3" and not any(sys.base_prefix in ln for ln in agent + verifier)


@pytest.mark.sandbox
async def test_a_fault_inside_the_episode_is_an_error_record(attack: Attack, monkeypatch: pytest.MonkeyPatch) -> None:
    """A crash in our own code while grading (here: grade_final raising) costs that attempt, not the run."""
    import clawgym_env.grading.grade as grade

    async def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("grader host fault")

    monkeypatch.setattr(grade, "grade_final", broken)
    summary, rec = await attack(ORIGINAL, "smoke-hello-file-p0", [bash("echo hi > hello.txt")], "bwrap")
    assert summary.ran == 1 and rec.status == "error" and rec.score == 0.0
    assert "RuntimeError: grader host fault" in (rec.error or "")
