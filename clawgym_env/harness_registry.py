"""Harness names -> ``"module:Class"`` entry points, loaded lazily.

The core never imports ``harnesses/`` (an import-linter contract checks it): it looks adapters up
here by name, so an adapter can live in any importable module, including a user's own. The shipped
adapters are in the table from the start; a user's own is added by ``add_harness`` (through
``clawgym_env.envs.register_harness``, which also gives it its Gymnasium id).
"""

from __future__ import annotations

import difflib
import importlib
import re
from collections.abc import Mapping
from types import MappingProxyType

from clawgym_env.errors import ConfigError
from clawgym_env.harness import Harness

__all__ = ["HARNESSES", "add_harness", "harness_names", "load_harness", "load_harness_class"]

_ENTRIES: dict[str, str] = {
    "claude-code": "harnesses.claude_code:ClaudeCode",
    "claude-code-bash": "harnesses.claude_code:ClaudeCodeBash",
    "openclaw": "harnesses.openclaw:OpenClaw",
    "custom": "harnesses.custom:CustomLoop",
    "codex": "harnesses.codex:Codex",
    "gemini-cli": "harnesses.gemini_cli:GeminiCli",
    "qwen-code": "harnesses.qwen_code:QwenCode",
    "opencode": "harnesses.opencode:OpenCode",
    "pi": "harnesses.pi:Pi",
    "mini-swe-agent": "harnesses.mini_swe_agent:MiniSweAgent",
}
HARNESSES: Mapping[str, str] = MappingProxyType(_ENTRIES)
"""Harness name -> ``"module:Class"``: the shipped adapters, then any added with ``add_harness``."""

_NAME = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")


def add_harness(name: str, entry: str) -> None:
    """Make ``entry`` (``"module:Class"``, a Harness subclass) the harness ``name``; adding the same pair again
    changes nothing, another entry under a name already taken is refused."""
    if not _NAME.fullmatch(name):
        raise ConfigError(f"harness name {name!r}: use lower-case words joined by '-' (e.g. 'my-cli')")
    cls = load_harness_class(entry)
    if cls.name != name:
        raise ConfigError(f"harness {entry!r} declares name {cls.name!r}, registered as {name!r}: make them the same")
    taken = _ENTRIES.get(name)
    if taken is not None and taken != entry:
        raise ConfigError(f"harness name {name!r} is taken by {taken}; register {entry} under another name")
    _ENTRIES[name] = entry


def harness_names() -> list[str]:
    """The built-in harness names, sorted."""
    return sorted(HARNESSES)


def load_harness_class(name: str) -> type[Harness]:
    """Resolve a harness name (or a ``"module:Class"`` entry point) to its adapter class."""
    entry = HARNESSES.get(name, name)
    if ":" not in entry:
        close = difflib.get_close_matches(name, HARNESSES, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"unknown harness {name!r}{hint} (known: {', '.join(harness_names())}, or pass 'module:Class')")
    module_name, _, attr = entry.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"harness entry point {entry!r} cannot be loaded: {exc}") from exc
    if not (isinstance(cls, type) and issubclass(cls, Harness)):
        raise ConfigError(f"harness entry point {entry!r} is not a clawgym_env.harness.Harness subclass")
    return cls


def load_harness(name: str | Harness) -> Harness:
    """An adapter instance for ``name``; an instance passes through unchanged."""
    if isinstance(name, Harness):
        return name
    return load_harness_class(name)()
