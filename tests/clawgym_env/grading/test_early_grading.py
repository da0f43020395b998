"""The grading sandbox started while the agent runs (``EarlyGrading``), tested as an attacker who read
the code would: its grader is up before the agent is done, yet reads only the final workspace (what
every agent process left once dead, never a later write); the agent cannot see or reach it; a grader
that died before its input is replaced; an episode ending badly leaves none of it behind."""

from __future__ import annotations

import asyncio
import json
import os
import textwrap
import uuid
from pathlib import Path
from typing import Any

import psutil
import pytest

from clawgym_env.episode import run_episode
from clawgym_env.grading.verify import run_verifiers, spawn_graders
from clawgym_env.proxy import ScriptedBackend
from clawgym_env.sandbox import Mount, SandboxConfig, create_sandbox
from clawgym_env.task import load_suite
from tests.sandbox_spy import assert_sandbox_dirs_gone, spy_on_sandboxes

pytestmark = pytest.mark.sandbox

DRIVER_MARK = "Runs a task's ``grade()``"
"""Text from the first line of the code driver's source, on the grader's command line."""

GRADE = """
import os
from pathlib import Path


def grade(transcript, workspace_path):
    ws = Path(workspace_path)
    hz = os.sysconf("SC_CLK_TCK")
    started = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19]) / hz
    agent_last = float((ws / "t_end").read_text().split()[0]) if (ws / "t_end").is_file() else 0.0
    text = (ws / "hello.txt").read_text() if (ws / "hello.txt").is_file() else ""
    return {
        "started_before_the_agent_ended": float(0 < started < agent_last),
        "final_content": float(text == "wrong\\n"),
        "no_late_file": float(not (ws / "late.txt").exists()),
    }
"""


@pytest.fixture
def spec(tmp_path: Path) -> Any:
    suite = tmp_path / "early-grading"
    (suite / "early" / "hidden").mkdir(parents=True)
    (suite / "suite.yaml").write_text("name: early-grading\ndescription: early grading tests\n")
    (suite / "early" / "task.yaml").write_text(
        textwrap.dedent("""\
        id: early
        version: 1
        instruction: Write hello.txt.
        hidden: hidden
        verifiers:
          - kind: code
            file: hidden/grade.py
        limits: {wall_time_s: 120, model_calls: 8, memory_mb: 1024}
        """)
    )
    (suite / "early" / "hidden" / "grade.py").write_text(GRADE)
    return load_suite(suite).get("early")


def bash(cmd: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "bash", "arguments": {"command": cmd}}]}


def grader_processes() -> list[int]:
    """Host pids of this test's code-driver graders (python3 -I -c <driver>), not other runs' on the machine."""
    found = []
    for p in psutil.Process().children(recursive=True):
        try:
            cmd = p.cmdline()
        except psutil.Error:
            continue
        if len(cmd) > 3 and cmd[0] == "python3" and cmd[2] == "-c" and DRIVER_MARK in cmd[3]:
            found.append(p.pid)
    return found


async def test_the_early_grader_sees_only_what_the_dead_agent_left(spec: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    log = spy_on_sandboxes(monkeypatch)
    # The agent leaves a writer behind (its own session) that would fix its answer after the harness
    # exits. Its last command stamps the time; the grader's process must have started before that.
    token = uuid.uuid4().hex  # names the writer among every process on the machine
    backend = ScriptedBackend(
        [
            bash(
                "echo wrong > hello.txt; "
                f"setsid sh -c 'sleep 60; echo \"hello world\" > /workspace/hello.txt; touch /workspace/late.txt; : {token}' "
                ">/dev/null 2>&1 </dev/null & "
                "sleep 0.5"
            ),  # the grader's start has time to finish while the agent runs
            bash("cat /proc/uptime > /workspace/t_end"),
            "Done.",
        ]
    )
    result = await run_episode(spec, "custom", backend)
    assert result.status == "completed", result.error
    assert result.subscores == {"code/started_before_the_agent_ended": 1.0, "code/final_content": 1.0, "code/no_late_file": 1.0}, (
        result.verifier_output
    )
    assert not [p for p in psutil.process_iter(["cmdline"]) if token in " ".join(p.info["cmdline"] or [])]
    assert [sb.config.sealed for sb in log.made] == [False, True]  # one grading sandbox: the early one
    assert_sandbox_dirs_gone([sb.host_dir_for_test for sb in log.made])
    assert not grader_processes()


async def test_the_agent_cannot_see_or_reach_the_early_grader(spec: Any) -> None:
    seen_from_host: list[int] = []

    async def watch() -> None:
        for _ in range(200):
            seen_from_host.extend(grader_processes())
            await asyncio.sleep(0.02)

    skip = "\\( -path /proc -o -path /sys -o -path /usr \\) -prune -o"
    probe = (
        "sleep 1.5; "  # by now the grader is up (the host sees it: seen_from_host)
        "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done | grep -c 'clawgym_gradin[g]'; "
        "ls -a /dev/shm /run /tmp 2>&1 | tr '\\n' ' '; echo; "
        f"find / {skip} \\( -name 'clawgym-*' -o -name grade.py -o -name 'seccomp.bpf' \\) -print 2>/dev/null | head -3; "
        "echo end"
    )
    backend = ScriptedBackend([bash(probe), "Done."])
    watcher = asyncio.ensure_future(watch())
    result = await run_episode(spec, "custom", backend)
    watcher.cancel()
    assert seen_from_host, "no early grader ran during the episode: the test proves nothing"
    out = result.calls[1].messages[-1]["content"]
    lines = out.splitlines()
    assert lines[1] == "0", out  # no process of the grader (nor its command line) visible to the agent
    assert "clawgym-" not in out and "grade.py" not in out and "seccomp" not in out, out
    assert lines[-1] == "end", out


async def test_a_grader_that_died_before_its_input_is_replaced(spec: Any, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "hello.txt").write_text("wrong\n")
    (ws / "t_end").write_text("99999999 0\n")
    cfg = SandboxConfig(workspace_src=ws, mounts=(Mount(host=spec.hidden_dir, inside=spec.hidden_mount),), sealed=True)
    async with create_sandbox("bwrap", cfg) as sb:
        spawned = await spawn_graders(spec, sb)
        (first,) = spawned
        assert first is not None and first.alive
        for proc in list(sb._procs):  # the grader dies before it is given its input
            os.killpg(proc.pid, 9)
            await proc.wait()
        assert not first.alive
        transcript = {"task_id": spec.full_id, "final_message": "", "messages": [], "params": {}}
        result = await run_verifiers(spec, sb, transcript, None, spawned)
    assert result.subscores["code/final_content"] == 1.0 and result.subscores["code/no_late_file"] == 1.0, (
        json.dumps(result.details),
        result.output,
    )
