"""ClawGym: train and evaluate LLM agents through real, unmodified agent harnesses."""

from __future__ import annotations

from clawgym_env._version import __version__

__all__ = ["__version__"]

from clawgym_env.envs.registration import register_envs as _register_envs

_register_envs()  # gym.make("ClawGym/ClaudeCode-v0" | "ClawGym/OpenClaw-v0" | "ClawGym/Custom-v0")
