"""The CLI harnesses beyond Claude Code and OpenClaw: a full Gym episode each in a bwrap sandbox (and, in
the docker tier, a docker container) with a scripted policy; the verifier scores 1.0, every call went over the harness's own wire format, and the
capture holds as many calls as the harness recorded itself."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from harnesses.codex import Codex
from harnesses.gemini_cli import GeminiCli
from harnesses.mini_swe_agent import MiniSweAgent
from harnesses.opencode import OpenCode
from harnesses.pi import Pi
from harnesses.qwen_code import QwenCode

from .conftest import require_installed
from .test_harness_episodes import drive

pytestmark = [pytest.mark.harness, pytest.mark.sandbox]

STDOUT_RECORD = {"gemini-cli", "qwen-code", "opencode", "pi"}
"""Harnesses whose own record is their stdout; Codex and mini-swe-agent keep theirs under HOME, which the
docker backend cannot download (``get_archive`` does not see tmpfs mounts)."""

OwnCount = Callable[[Path], int]
"""The harness's own count of its model calls, read from its transcript folder next to the capture."""

CASES: dict[str, tuple[str, str, str, OwnCount]] = {
    "mini-swe-agent": ("ClawGym/MiniSweAgent-v0", "openai-chat", "/v1/chat/completions",
                       lambda d: MiniSweAgent.count_calls(d / "mini-swe-agent")),
    "codex": ("ClawGym/Codex-v0", "openai-responses", "/v1/responses", lambda d: Codex.count_calls(d / "codex")),
    "gemini-cli": ("ClawGym/GeminiCli-v0", "gemini", "/v1beta/models/policy:streamGenerateContent",
                   lambda d: GeminiCli.count_calls((d / "stdout.log").read_text())),
    "qwen-code": ("ClawGym/QwenCode-v0", "openai-chat", "/v1/chat/completions",
                  lambda d: QwenCode.count_calls((d / "stdout.log").read_text())),
    "opencode": ("ClawGym/OpenCode-v0", "openai-chat", "/v1/chat/completions",
                 lambda d: OpenCode.count_calls((d / "stdout.log").read_text())),
    "pi": ("ClawGym/Pi-v0", "openai-chat", "/v1/chat/completions", lambda d: Pi.count_calls((d / "stdout.log").read_text())),
}


@pytest.mark.parametrize("sandbox", ["bwrap", pytest.param("docker", marks=pytest.mark.docker)])
@pytest.mark.parametrize("name", sorted(CASES))
def test_episode_scores_and_capture_matches_own_record(name: str, sandbox: str, smoke_suite: Path, tmp_path: Path) -> None:
    require_installed(name)
    env_id, dialect, path, own_count = CASES[name]
    steps, info, reward = drive(env_id, smoke_suite, tmp_path, sandbox=sandbox)
    assert info["status"] == "completed", (info["error"], info["harness_output_tail"][-2000:])
    assert reward == 1.0 and info["subscores"] == {"code/file_exists": 1.0, "code/content_exact": 1.0}
    calls = info["capture"]
    streams = name != "mini-swe-agent"  # litellm.completion without stream=True; every CLI streams
    assert {(c.dialect, c.path, c.stream, c.error) for c in calls} == {(dialect, path, streams, None)}
    assert len(calls) == steps
    if sandbox == "bwrap" or name in STDOUT_RECORD:  # docker's archive API cannot read the tmpfs HOME
        assert own_count(tmp_path / f"{info['session_id']}.harness") == len(calls)
    assert [c.call_index for c in calls] == list(range(len(calls)))
    # No telemetry, update check, login or tool download went out (nor was tried); OpenCode finds the ripgrep its
    # adapter installs instead of fetching one from GitHub (which it did in the minimal docker image).
    assert info["egress_attempts"] == [], info["egress_attempts"]
