"""Gymnasium ids for the built-in harnesses, registered when ``clawgym_env`` is imported."""

from __future__ import annotations

from collections.abc import Mapping

import gymnasium as gym

__all__ = ["ENV_IDS", "register_envs"]

ENV_IDS: Mapping[str, str] = {
    "ClawGym/ClaudeCode-v0": "claude-code",
    "ClawGym/ClaudeCodeBash-v0": "claude-code-bash",
    "ClawGym/OpenClaw-v0": "openclaw",
    "ClawGym/Custom-v0": "custom",
    "ClawGym/Codex-v0": "codex",
    "ClawGym/GeminiCli-v0": "gemini-cli",
    "ClawGym/QwenCode-v0": "qwen-code",
    "ClawGym/OpenCode-v0": "opencode",
    "ClawGym/Pi-v0": "pi",
    "ClawGym/MiniSweAgent-v0": "mini-swe-agent",
}
"""Env id -> harness name; other kwargs (suite, task, harness_version, sandbox, tokenizer, ...) go to gym.make."""

_ENTRY_POINT = "clawgym_env.envs.harness_env:ClawGymEnv"


def register_envs() -> None:
    """Register every id in ENV_IDS; idempotent (re-importing does not warn)."""
    for env_id, harness in ENV_IDS.items():
        if env_id not in gym.registry:
            # nondeterministic: a real harness process, wall-clock timings, fresh session ids and
            # model-call timestamps differ between two runs even with the same seed and actions.
            gym.register(id=env_id, entry_point=_ENTRY_POINT, kwargs={"harness": harness}, nondeterministic=True)
