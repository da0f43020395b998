"""Zero-copy grading on bwrap: a reaped sandbox's final workspace, stacked under a sealed sandbox as
read-only layers (``Sandbox.final_layers`` + ``SandboxConfig.workspace_layers``), looks exactly as a
download would: the agent's changes and deletions are there, and what a download strips (escaping
symlinks, special files, setuid bits) is gone."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from clawgym_env.errors import ConfigError
from clawgym_env.sandbox import SandboxConfig, create_sandbox

AGENT = (
    "cd /workspace && rm gone.txt && echo changed > kept.txt && mkdir -p out && echo new > out/new.txt && "
    "mkfifo pipe && cp /bin/sh out/sh && chmod 4755 out/sh && ln -s /verifier/expected.txt out/answer.txt && "
    "ln -s ../../../etc/passwd out/up && ln -s new.txt out/inside && "
    "{ setsid sh -c 'sleep 60; echo late > /workspace/late.txt' >/dev/null 2>&1 < /dev/null & }"
)
LOOK = (
    "cd /workspace && ls -A | tr '\\n' ' '; echo; cat kept.txt out/new.txt out/inside; ls -A out | tr '\\n' ' '; "
    "echo; stat -c %a out/sh; touch /workspace/graded && echo writable"
)


def agent_workspace(tmp_path: Path) -> Path:
    """The task's workspace AGENT changes: a file it deletes and one it rewrites."""
    src = tmp_path / "ws"
    src.mkdir()
    (src / "gone.txt").write_text("the agent deletes this\n")
    (src / "kept.txt").write_text("original\n")
    return src


@pytest.mark.sandbox
async def test_final_layers_of_a_bwrap_sandbox_grade_like_a_download(tmp_path: Path) -> None:
    src = agent_workspace(tmp_path)
    async with create_sandbox("bwrap", SandboxConfig(workspace_src=src)) as agent:
        r = await agent.exec(["sh", "-c", AGENT])
        assert r.return_code == 0, r.stderr
        await agent.reap()
        final = await agent.final_layers()
        assert final is not None and final.src == src and final.skipped == ("pipe",)
        cfg = SandboxConfig(workspace_src=final.src, workspace_layers=final.layers, sealed=True)
        async with create_sandbox("bwrap", cfg) as grading:
            seen = await grading.exec(["sh", "-c", LOOK])
        again = await agent.exec(["sh", "-c", "ls -A /workspace | tr '\\n' ' '"])  # the grader's writes stay its own
    assert_graded_like_a_download(seen.stdout)
    assert "graded" not in again.stdout.split()


def assert_graded_like_a_download(look: str) -> None:
    """What LOOK printed in the grading sandbox after AGENT ran in the agent's."""
    names, kept, new, inside, out, mode, writable = look.splitlines()
    assert names.split() == ["kept.txt", "out"], look  # deleted, FIFO gone, no late.txt (reaped)
    assert (kept, new, inside) == ("changed", "new", "new")
    assert sorted(out.split()) == ["inside", "new.txt", "sh"]  # links out of the workspace are gone
    assert mode == "755" and writable == "writable"


@pytest.mark.sandbox
@pytest.mark.docker
async def test_docker_shares_no_layers(tmp_path: Path) -> None:
    async with create_sandbox("docker", SandboxConfig(workspace_src=tmp_path)) as sb:
        await sb.reap()
        assert await sb.final_layers() is None  # the workspace is downloaded instead
    with pytest.raises(ConfigError, match="workspace_layers"):
        async with create_sandbox("docker", SandboxConfig(workspace_src=tmp_path, workspace_layers=(tmp_path,))):
            pass


@pytest.mark.sandbox
async def test_a_grader_spawned_while_the_agent_runs_sees_its_work_only_after_final_layers(tmp_path: Path) -> None:
    src = agent_workspace(tmp_path)
    async with create_sandbox("bwrap", SandboxConfig(workspace_src=src)) as agent:
        ahead = agent.layers_ahead()
        assert ahead is not None
        cfg = SandboxConfig(workspace_src=ahead.src, workspace_layers=ahead.layers, sealed=True)
        async with create_sandbox("bwrap", cfg) as grading:
            waiting = await grading.spawn(["sh", "-c", "read go; " + LOOK])  # mounted now, reads after stdin
            r = await agent.exec(["sh", "-c", AGENT])
            assert r.return_code == 0, r.stderr
            during = await grading.exec(["sh", "-c", "ls -A /workspace | tr '\\n' ' '; cat /workspace/kept.txt"])
            await agent.reap()
            final = await agent.final_layers()
            assert final is not None and (final.src, final.layers) == (ahead.src, ahead.layers)
            assert waiting.alive
            seen = await waiting.finish(b"go\n", 30)
        after = await agent.exec(["sh", "-c", "cd /workspace && ls -A | tr '\\n' ' '; cat kept.txt"])
    assert during.stdout.split() == ["gone.txt", "kept.txt", "original"]  # none of the agent's work yet
    assert_graded_like_a_download(seen.stdout)
    assert after.stdout.split() == ["kept.txt", "out", "changed"]  # the agent's own view is unchanged by the move


@pytest.mark.sandbox
async def test_nothing_of_the_agent_writes_the_workspace_once_reaped(tmp_path: Path) -> None:
    async with create_sandbox("bwrap", SandboxConfig(workspace_src=tmp_path)) as agent:
        spin = "i=0; while :; do i=$((i+1)); echo $i >> /workspace/n; done"
        running = asyncio.ensure_future(agent.exec(["sh", "-c", f"{{ setsid sh -c '{spin}' & }} </dev/null; sleep 60"]))
        assert agent.dir is not None
        counter = agent.dir / "upper" / "n"
        for _ in range(500):
            if counter.is_file() and counter.stat().st_size > 100:
                break
            await asyncio.sleep(0.01)
        await agent.reap()  # mid-episode: the writer is still spinning
        first = counter.stat().st_size
        await asyncio.sleep(0.2)
        assert counter.stat().st_size == first > 100
        assert (await running).return_code != 0
