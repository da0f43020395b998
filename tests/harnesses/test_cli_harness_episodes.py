"""The CLI harnesses beyond Claude Code and OpenClaw: a full Gym episode each in a bwrap sandbox (and, in
the docker tier, a docker container) with a scripted policy; the verifier scores 1.0, every call went over the harness's own wire format, and the
capture holds as many calls as the harness recorded itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawgym_env.harness_registry import load_harness

from .conftest import require_installed
from .test_harness_episodes import drive

pytestmark = [pytest.mark.harness, pytest.mark.sandbox]

STDOUT_RECORD = {"gemini-cli", "qwen-code", "opencode", "pi"}
"""Harnesses whose own record is their stdout; Codex and mini-swe-agent keep theirs under HOME, which the
docker backend cannot download (``get_archive`` does not see tmpfs mounts)."""

CASES: dict[str, tuple[str, str, str]] = {
    "mini-swe-agent": ("ClawGym/MiniSweAgent-v0", "openai-chat", "/v1/chat/completions"),
    "codex": ("ClawGym/Codex-v0", "openai-responses", "/v1/responses"),
    "gemini-cli": ("ClawGym/GeminiCli-v0", "gemini", "/v1beta/models/policy:streamGenerateContent"),
    "qwen-code": ("ClawGym/QwenCode-v0", "openai-chat", "/v1/chat/completions"),
    "opencode": ("ClawGym/OpenCode-v0", "openai-chat", "/v1/chat/completions"),
    "pi": ("ClawGym/Pi-v0", "openai-chat", "/v1/chat/completions"),
}
"""Gym id, wire format and path of each; the harness's own count of its model calls comes from ``count_calls``."""


@pytest.mark.parametrize("sandbox", ["bwrap", pytest.param("docker", marks=pytest.mark.docker)])
@pytest.mark.parametrize("name", sorted(CASES))
def test_episode_scores_and_capture_matches_own_record(name: str, sandbox: str, smoke_suite: Path, tmp_path: Path) -> None:
    require_installed(name)
    env_id, dialect, path = CASES[name]
    steps, info, reward = drive(env_id, smoke_suite, tmp_path, sandbox=sandbox)
    assert info["status"] == "completed", (info["error"], info["harness_output_tail"][-2000:])
    assert reward == 1.0 and info["subscores"] == {"code/file_exists": 1.0, "code/content_exact": 1.0}
    calls = info["capture"]
    streams = name != "mini-swe-agent"  # litellm.completion without stream=True; every CLI streams
    assert {(c.dialect, c.path, c.stream, c.error) for c in calls} == {(dialect, path, streams, None)}
    assert len(calls) == steps
    if sandbox == "bwrap" or name in STDOUT_RECORD:  # docker's archive API cannot read the tmpfs HOME
        assert load_harness(name).count_calls(tmp_path / f"{info['session_id']}.harness") == len(calls)
    assert [c.call_index for c in calls] == list(range(len(calls)))
    # No telemetry, update check, login or tool download went out (nor was tried); OpenCode finds the ripgrep its
    # adapter installs instead of fetching one from GitHub (which it did in the minimal docker image).
    assert info["egress_attempts"] == [], info["egress_attempts"]
