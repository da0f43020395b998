"""Zero-copy grading on bwrap: a reaped sandbox's final workspace, stacked under a sealed sandbox as
read-only layers (``Sandbox.final_layers`` + ``SandboxConfig.workspace_layers``), looks exactly as a
download would: the agent's changes and deletions are there, and what a download strips (escaping
symlinks, special files, setuid bits) is gone."""

from __future__ import annotations

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
LOOK = ("cd /workspace && ls -A | tr '\\n' ' '; echo; cat kept.txt out/new.txt out/inside; ls -A out | tr '\\n' ' '; "
        "echo; stat -c %a out/sh; touch /workspace/graded && echo writable")


@pytest.mark.sandbox
async def test_final_layers_of_a_bwrap_sandbox_grade_like_a_download(tmp_path: Path) -> None:
    src = tmp_path / "ws"
    src.mkdir()
    (src / "gone.txt").write_text("the agent deletes this\n")
    (src / "kept.txt").write_text("original\n")
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
    names, kept, new, inside, out, mode, writable = seen.stdout.splitlines()
    assert names.split() == ["kept.txt", "out"], seen.stdout  # deleted, FIFO gone, no late.txt (reaped)
    assert (kept, new, inside) == ("changed", "new", "new")
    assert sorted(out.split()) == ["inside", "new.txt", "sh"]  # links out of the workspace are gone
    assert mode == "755" and writable == "writable"
    assert "graded" not in again.stdout.split()


@pytest.mark.sandbox
@pytest.mark.docker
async def test_docker_shares_no_layers(tmp_path: Path) -> None:
    async with create_sandbox("docker", SandboxConfig(workspace_src=tmp_path)) as sb:
        await sb.reap()
        assert await sb.final_layers() is None  # the workspace is downloaded instead
    with pytest.raises(ConfigError, match="workspace_layers"):
        async with create_sandbox("docker", SandboxConfig(workspace_src=tmp_path, workspace_layers=(tmp_path,))):
            pass
