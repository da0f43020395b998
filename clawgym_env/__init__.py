"""ClawGym: train and evaluate LLM agents through real, unmodified agent harnesses."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]

from clawgym_env.envs.registration import register_envs as _register_envs

_register_envs()  # gym.make("ClawGym/ClaudeCode-v0" | "ClawGym/OpenClaw-v0" | "ClawGym/Custom-v0")
