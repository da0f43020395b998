"""Gymnasium ids of harnesses: ``ClawGym/<EnvName>-v0``, registered when ``clawgym_env`` is imported.

Every id is made by ``register_harness``: the shipped adapters at import, then those installed packages declare in
the ``clawgym.harnesses`` entry-point group (``my-cli = "mypkg.adapter:MyCli"``), then any a user registers.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import entry_points
from types import MappingProxyType

import gymnasium as gym

from clawgym_env.errors import ConfigError
from clawgym_env.harness_registry import HARNESSES, add_harness

__all__ = ["ENTRY_POINT_GROUP", "ENV_IDS", "SHIPPED_ENV_NAMES", "register_envs", "register_harness"]

ENTRY_POINT_GROUP = "clawgym.harnesses"
"""Installed packages name their adapters here: ``harness-name = "module:Class"``."""

SHIPPED_ENV_NAMES: Mapping[str, str] = {
    "claude-code": "ClaudeCode",
    "claude-code-bash": "ClaudeCodeBash",
    "openclaw": "OpenClaw",
    "custom": "Custom",
    "codex": "Codex",
    "gemini-cli": "GeminiCli",
    "qwen-code": "QwenCode",
    "opencode": "OpenCode",
    "pi": "Pi",
    "mini-swe-agent": "MiniSweAgent",
}
"""Shipped harness name -> its id's name part (the ids the project has always had)."""

_ENV_IDS: dict[str, str] = {}
ENV_IDS: Mapping[str, str] = MappingProxyType(_ENV_IDS)
"""Env id -> harness name, for every id registered so far; other kwargs (suite, task, harness_version, sandbox,
tokenizer, ...) go to gym.make."""

_ENTRY_POINT = "clawgym_env.envs.harness_env:ClawGymEnv"


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("-"))


def register_harness(name: str, entry: str | None = None, env_name: str | None = None) -> str:
    """Give the harness ``name`` its Gymnasium id, ``ClawGym/<env_name>-v0`` (default: ``name`` CamelCased,
    "my-cli" -> "MyCli"), and return the id. ``entry`` (``"module:Class"``) adds a harness of your own to the
    harness registry first, so ``clawgym bench run --harness NAME`` and training find it too. Idempotent."""
    if entry is not None:
        add_harness(name, entry)
    elif name not in HARNESSES:
        raise ConfigError(f"harness {name!r} is not registered; pass its entry point ('module:Class')")
    env_id = f"ClawGym/{env_name or _camel(name)}-v0"
    owner = _ENV_IDS.get(env_id)
    if owner is not None and owner != name:
        raise ConfigError(f"Gymnasium id {env_id} already belongs to harness {owner!r}; pass another env_name")
    if env_id not in gym.registry:
        # nondeterministic: a real harness process, wall-clock timings, fresh session ids and
        # model-call timestamps differ between two runs even with the same seed and actions.
        gym.register(id=env_id, entry_point=_ENTRY_POINT, kwargs={"harness": name}, nondeterministic=True)
    _ENV_IDS[env_id] = name
    return env_id


def register_envs() -> None:
    """Register the shipped harnesses' ids, then those of the ``clawgym.harnesses`` entry points; idempotent."""
    for name, env_name in SHIPPED_ENV_NAMES.items():
        register_harness(name, env_name=env_name)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        register_harness(ep.name, ep.value)
