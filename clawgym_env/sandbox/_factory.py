"""Backend name -> "module:Class", imported only when asked for."""

from __future__ import annotations

import difflib
import importlib

from clawgym_env.errors import ConfigError
from clawgym_env.sandbox.base import Sandbox, SandboxConfig

__all__ = ["BACKENDS", "DEFAULT_BACKEND", "backend_class", "create_sandbox"]

BACKENDS: dict[str, str] = {
    "bwrap": "clawgym_env.sandbox.bwrap:BwrapSandbox",
    "docker": "clawgym_env.sandbox.docker:DockerSandbox",
    "none": "clawgym_env.sandbox.local:LocalSandbox",
}
DEFAULT_BACKEND = "bwrap"


def backend_class(backend: str) -> type[Sandbox]:
    """The Sandbox subclass registered under ``backend`` (imports its module now)."""
    try:
        target = BACKENDS[backend]
    except KeyError:
        near = difflib.get_close_matches(backend, BACKENDS, n=1)
        hint = f" Did you mean {near[0]!r}?" if near else ""
        raise ConfigError(f"sandbox backend {backend!r} is unknown; choose one of {sorted(BACKENDS)}.{hint}") from None
    module, _, attr = target.partition(":")
    cls: type[Sandbox] = getattr(importlib.import_module(module), attr)
    return cls


def create_sandbox(backend: str, config: SandboxConfig) -> Sandbox:
    """A new, not yet started sandbox; use ``async with create_sandbox(...) as sb``."""
    return backend_class(backend)(config)
