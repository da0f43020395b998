"""Harness names -> ``"module:Class"`` entry points, loaded lazily.

The core never imports ``harnesses/`` (an import-linter contract checks it): it looks adapters up
here by name, so an adapter can live in any importable module, including a user's own.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Mapping

from clawgym_env.errors import ConfigError
from clawgym_env.harness import Harness

__all__ = ["HARNESSES", "harness_names", "load_harness", "load_harness_class"]

HARNESSES: Mapping[str, str] = {
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
