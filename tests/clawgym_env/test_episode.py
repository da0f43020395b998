"""run_episode with the real custom harness in real bwrap sandboxes: every ending gets a clear
status, the capture holds every call, and nothing is left behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clawgym_env.episode import run_episode
from clawgym_env.proxy import ScriptedBackend
from clawgym_env.proxy.backends.base import CompletionRequest
from clawgym_env.sandbox import SandboxState
from clawgym_env.task import load_suite
from tests.sandbox_spy import assert_sandbox_dirs_gone, spy_on_sandboxes

pytestmark = pytest.mark.sandbox

SUITE = Path(__file__).parents[1] / "harnesses" / "tasks" / "h6-smoke"


def bash(cmd: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "bash", "arguments": {"command": cmd}}]}


@pytest.fixture
def spec() -> Any:
    return load_suite(SUITE).get("hello-file")


@pytest.fixture
def sandboxes(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every sandbox run_episode creates, to check it is gone afterwards."""
    return spy_on_sandboxes(monkeypatch).made


def assert_no_leftovers(made: list[Any]) -> None:
    """Each sandbox is closed, its host folder is gone, and no process still runs in it."""
    assert made, "no sandbox was created"
    dirs = [sb.host_dir_for_test for sb in made]
    for sb in made:
        assert sb.state is SandboxState.CLOSED
    assert_sandbox_dirs_gone(dirs)


async def test_completed_episode_scores_and_captures_every_call(spec: Any, sandboxes: list[Any], tmp_path: Path) -> None:
    backend = ScriptedBackend(
        [
            {"tool_calls": [{"name": "write", "arguments": {"path": "hello.txt", "content": "hello world\n"}}]},
            bash("cat hello.txt"),
            "Done.",
        ]
    )
    result = await run_episode(spec, "custom", backend, capture_dir=tmp_path / "cap", workspace_out=tmp_path / "ws")
    assert result.status == "completed", result.error
    assert result.score == 1.0 and result.subscores == {"code/file_exists": 1.0, "code/content_exact": 1.0}
    assert result.harness_exit_code == 0
    assert [c.call_index for c in result.calls] == [0, 1, 2]
    assert result.final_message == "Done."
    # the capture file and the harness's own transcript agree with what the proxy served
    assert result.capture_path is not None and len(result.capture_path.read_text().splitlines()) == 3
    from harnesses.custom import CustomLoop

    assert (result.transcript_path / "custom-transcript.jsonl").is_file()
    assert CustomLoop().count_calls(result.transcript_path) == 3
    assert (tmp_path / "ws" / "hello.txt").read_text() == "hello world\n"
    assert set(result.timings) >= {"sandbox", "harness", "model", "verifier", "total"}
    assert_no_leftovers(sandboxes)


async def test_harness_crash_is_reported_and_cleaned_up(spec: Any, sandboxes: list[Any], tmp_path: Path) -> None:
    backend = ScriptedBackend([bash("kill -9 $PPID")], default="unreachable")
    result = await run_episode(spec, "custom", backend, capture_dir=tmp_path)
    assert result.status == "crashed"
    assert result.harness_exit_code not in (0, None)
    assert "exited with code" in (result.error or "")
    assert len(result.calls) == 1 and result.score == 0.0
    assert_no_leftovers(sandboxes)


async def test_hanging_harness_times_out(spec: Any, sandboxes: list[Any], tmp_path: Path) -> None:
    backend = ScriptedBackend([bash("sleep 600")], default="done")
    result = await run_episode(spec, "custom", backend, wall_time_s=3)
    assert result.status == "timeout"
    assert "wall-time" in (result.error or "")
    assert result.timings["harness"] < 30
    assert_no_leftovers(sandboxes)


async def test_output_flood_kills_the_harness(spec: Any, sandboxes: list[Any], tmp_path: Path) -> None:
    backend = ScriptedBackend([bash("head -c 100000000 /dev/zero > /proc/$PPID/fd/1; sleep 60")], default="done")
    result = await run_episode(spec, "custom", backend, wall_time_s=120)
    assert result.status == "crashed"
    assert "flooded" in (result.error or "") and result.limit_hit == "output"
    assert result.timings["harness"] < 60
    assert len(result.harness_output_tail) <= 4000
    assert_no_leftovers(sandboxes)


async def test_filling_the_memory_limit_is_a_graded_crash_not_a_dodge(spec: Any, sandboxes: list[Any], tmp_path: Path) -> None:
    """Workspace files count against the memory limit (tmpfs). An agent that fills it ends "crashed" at that
    limit, still graded, and a trainer takes that verdict: under the default mask an agent about to fail
    could otherwise crash on purpose and leave the group instead of taking its zero."""
    from trainers.rollout import episode_reward

    backend = ScriptedBackend([bash("echo hello world > hello.txt; head -c 3000M /dev/zero > big; sleep 30")], default="done")
    result = await run_episode(spec, "custom", backend, wall_time_s=120)
    assert result.status == "crashed" and result.limit_hit == "memory", (result.status, result.error)
    assert result.subscores, result.verifier_output  # the verifier ran on what it left
    assert episode_reward(result) == result.score
    assert_no_leftovers(sandboxes)


async def test_over_the_call_limit_is_truncated(spec: Any, sandboxes: list[Any], tmp_path: Path) -> None:
    backend = ScriptedBackend(lambda req: bash("true"))  # never finishes on its own
    result = await run_episode(spec, "custom", backend, capture_dir=tmp_path)
    assert spec.limits.model_calls == 8
    assert result.status == "truncated"
    answered = [c for c in result.calls if c.error is None]
    assert len(answered) == 8  # every allowed call was served and captured
    assert_no_leftovers(sandboxes)


async def test_policy_backend_failure_is_an_error_not_a_crash(spec: Any, sandboxes: list[Any]) -> None:
    def boom(req: CompletionRequest) -> Any:
        raise RuntimeError("policy exploded")

    result = await run_episode(spec, "custom", ScriptedBackend(boom))
    assert result.status == "error"
    assert "policy exploded" in (result.error or "")
    assert_no_leftovers(sandboxes)


async def test_missing_install_is_an_error_status(spec: Any, tmp_path: Path) -> None:
    result = await run_episode(spec, "claude-code", ScriptedBackend(["x"]), cache_dir=tmp_path)
    assert result.status == "error"
    assert "clawgym harness install claude-code" in (result.error or "")
    assert result.calls == []


async def test_imported_clawgym_task_runs_in_its_own_workspace(tmp_path: Path, sandboxes: list[Any], clawgym_sample_dir: Path) -> None:
    """A real ClawGym sample task (copied, imported): the harness works in /root/.openclaw/workspace,
    sees the task's input files, and the task's own reward script grades the result."""
    import shutil

    from clawgym_env.authoring.importers import import_suite

    sample = clawgym_sample_dir / "task_0000"
    shutil.copytree(sample, tmp_path / "src" / sample.name)
    import_suite("clawgym", tmp_path / "src", "cg-sample", tmp_path / "out")
    spec = load_suite(tmp_path / "out" / "cg-sample").tasks[0]
    assert spec.workspace_mount == "/root/.openclaw/workspace"
    result = await run_episode(spec, "custom", ScriptedBackend([bash("pwd; ls input")], default="Nothing done."))
    assert result.status == "completed" and result.error is None  # the verifier ran cleanly
    assert result.score == 0.0  # doing nothing earns nothing
    tool_output = next(m for m in result.calls[-1].messages if m.get("role") == "tool")["content"]
    assert tool_output.splitlines()[1] == "/root/.openclaw/workspace"
    assert set(tool_output.splitlines()[2:]) == {p.name for p in (sample / "input_files" / "input").iterdir()}
    assert_no_leftovers(sandboxes)
