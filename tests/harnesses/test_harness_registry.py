"""harness_registry: names and "module:Class" entry points resolve to adapters, mistakes say why."""

from __future__ import annotations

import pytest

from clawgym_env.errors import ConfigError
from clawgym_env.harness import Harness
from clawgym_env.harness_registry import HARNESSES, harness_names, load_harness, load_harness_class


def test_builtin_names_load_their_adapters() -> None:
    assert harness_names() == ["claude-code", "claude-code-bash", "codex", "custom", "gemini-cli", "mini-swe-agent",
                               "openclaw", "opencode", "pi", "qwen-code"]
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
