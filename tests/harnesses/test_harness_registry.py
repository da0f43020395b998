"""harness_registry: names and "module:Class" entry points resolve to adapters, mistakes say why."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import gymnasium as gym
import pytest

from clawgym_env.errors import ConfigError
from clawgym_env.harness import Harness
from clawgym_env.harness_registry import HARNESSES, harness_names, load_harness, load_harness_class
from harnesses.custom import CustomLoop


class MyLoop(CustomLoop):
    """A user's own adapter (here ClawGym's loop under another name), defined outside ``harnesses/``."""

    name: ClassVar[str] = "my-loop"


def test_builtin_names_load_their_adapters() -> None:
    assert harness_names() == [
        "claude-code",
        "claude-code-bash",
        "codex",
        "custom",
        "gemini-cli",
        "mini-swe-agent",
        "openclaw",
        "opencode",
        "pi",
        "qwen-code",
    ]
    for name in harness_names():
        adapter = load_harness(name)
        assert isinstance(adapter, Harness)
        assert adapter.name == name
        assert adapter.version


def test_entry_point_string_and_instance_pass_through() -> None:
    cls = load_harness_class(HARNESSES["custom"])
    assert cls.name == "custom"
    inst = cls()
    assert load_harness(inst) is inst


def test_unknown_name_suggests_the_closest() -> None:
    with pytest.raises(ConfigError, match="did you mean 'claude-code'"):
        load_harness("claude-cod")


def test_entry_point_that_is_not_a_harness_is_refused() -> None:
    with pytest.raises(ConfigError, match="not a clawgym_env.harness.Harness subclass"):
        load_harness_class("pathlib:Path")
    with pytest.raises(ConfigError, match="cannot be loaded"):
        load_harness_class("no_such_module_xyz:Thing")


def test_core_does_not_import_plugins() -> None:
    """import-linter contract: clawgym_env never imports harnesses/ (checked here as well as in lint)."""
    import subprocess
    import sys

    code = (
        "import sys, clawgym_env, clawgym_env.episode, clawgym_env.envs.harness_env, clawgym_env.harness_registry;"
        "print(any(m == 'harnesses' or m.startswith('harnesses.') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.sandbox
def test_a_users_adapter_gets_a_gym_id_the_way_the_shipped_ones_do(smoke_suite: Path, tmp_path: Path) -> None:
    """``register_harness`` is how the shipped adapters get their ids at import; a user's own goes the same way, and
    then runs a real episode through gym.make, bench run and training (they all look the name up in HARNESSES)."""
    from clawgym_env import harness_registry
    from clawgym_env.envs import ENV_IDS, register_harness, registration

    from .test_harness_episodes import drive

    entry = f"{MyLoop.__module__}:MyLoop"
    try:
        env_id = register_harness("my-loop", entry)
        assert env_id == "ClawGym/MyLoop-v0" and ENV_IDS[env_id] == "my-loop" and HARNESSES["my-loop"] == entry
        assert register_harness("my-loop", entry) == env_id  # idempotent
        assert ENV_IDS["ClawGym/OpenClaw-v0"] == "openclaw"  # the shipped ones went through the same function
        steps, info, reward = drive(env_id, smoke_suite, tmp_path)
        assert info["status"] == "completed" and reward == 1.0, info["error"]
        assert load_harness("my-loop").count_calls(tmp_path / f"{info['session_id']}.harness") == len(info["capture"])
        with pytest.raises(ConfigError, match="already belongs to harness 'custom'"):
            register_harness("my-loop", entry, env_name="Custom")
        with pytest.raises(ConfigError, match="declares name 'my-loop', registered as 'custom'"):
            register_harness("custom", entry)
        with pytest.raises(ConfigError, match="not registered"):
            register_harness("nobody-here")
    finally:  # leave the process as the other tests expect it
        registration._ENV_IDS.pop("ClawGym/MyLoop-v0", None)
        harness_registry._ENTRIES.pop("my-loop", None)
        gym.registry.pop("ClawGym/MyLoop-v0", None)
