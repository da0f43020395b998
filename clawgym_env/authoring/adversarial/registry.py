"""Finding strategies: the built-in library, installed plug-ins, and "module:Class" references.

A suite author adds a strategy three ways, all naming a ``Strategy`` subclass:

- ``--strategy pkg.module:Class`` (or ``path/to/file.py:Class``) on ``clawgym tasks check --adversarial``;
- ``adversarial_strategies: [...]`` in the suite's ``suite.yaml`` metadata (file paths relative to the suite);
- an installed package's entry point in the group ``clawgym.adversarial_strategies``.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from importlib.metadata import entry_points
from pathlib import Path

from clawgym_env.authoring.adversarial.base import Strategy
from clawgym_env.authoring.adversarial.claims import Hedge, UnsupportedClaims
from clawgym_env.authoring.adversarial.code import (
    AlwaysEqual,
    PinSource,
    RaiseOnInspect,
    TestRunnerHook,
    TrivialTests,
    VerdictPrint,
)
from clawgym_env.authoring.adversarial.degenerate import BlanketMask, Hollow
from clawgym_env.authoring.adversarial.judge_bait import JudgeBait
from clawgym_env.authoring.adversarial.outputs import CopyInput, Empty, Everything, FirstItemOnly, Placeholder, Skeleton
from clawgym_env.errors import ConfigError

__all__ = ["ENTRY_POINT_GROUP", "BUILTIN", "default_strategies", "load_strategy", "suite_strategies"]

ENTRY_POINT_GROUP = "clawgym.adversarial_strategies"
BUILTIN: tuple[type[Strategy], ...] = (
    Empty,
    Placeholder,
    Skeleton,
    Everything,
    CopyInput,
    FirstItemOnly,
    Hollow,
    BlanketMask,
    Hedge,
    UnsupportedClaims,
    AlwaysEqual,
    RaiseOnInspect,
    VerdictPrint,
    TestRunnerHook,
    PinSource,
    TrivialTests,
    JudgeBait,
)


def _check(obj: object, ref: str) -> Strategy:
    if isinstance(obj, type) and issubclass(obj, Strategy):
        return obj()
    raise ConfigError(
        f"strategy {ref!r} is {obj!r}, not a subclass of clawgym_env.authoring.adversarial.Strategy. "
        "Fix: point at a class deriving from Strategy."
    )


def load_strategy(ref: str, base_dir: Path | None = None) -> Strategy:
    """Instantiate ``"pkg.module:Class"`` or ``"file.py:Class"`` (a file path is relative to ``base_dir``)."""
    module_ref, sep, attr = ref.rpartition(":")
    if not sep or not module_ref or not attr:
        raise ConfigError(f"strategy {ref!r} must look like 'package.module:Class' or 'file.py:Class'.")
    if module_ref.endswith(".py"):
        path = Path(module_ref)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        if not path.is_file():
            raise ConfigError(f"strategy {ref!r}: no file {path}. Fix: give a path relative to the suite folder.")
        name = f"clawgym_strategy_{abs(hash(str(path.resolve())))}"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(module_ref)
        except ImportError as exc:
            raise ConfigError(f"strategy {ref!r}: cannot import {module_ref}: {exc}") from exc
    if not hasattr(module, attr):
        raise ConfigError(f"strategy {ref!r}: {module_ref} defines no {attr}.")
    return _check(getattr(module, attr), ref)


def default_strategies() -> list[Strategy]:
    """The built-in library plus every installed plug-in (entry point group ``clawgym.adversarial_strategies``)."""
    out: list[Strategy] = [cls() for cls in BUILTIN]
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        out.append(_check(ep.load(), f"{ep.name} = {ep.value}"))
    return out


def suite_strategies(metadata: dict[str, object], suite_dir: Path) -> list[Strategy]:
    """The strategies a suite names in ``suite.yaml`` (``metadata.adversarial_strategies``)."""
    refs = metadata.get("adversarial_strategies") or []
    if not isinstance(refs, list) or not all(isinstance(r, str) for r in refs):
        raise ConfigError(f"{suite_dir / 'suite.yaml'}: metadata.adversarial_strategies must be a list of 'module:Class' strings.")
    return [load_strategy(r, suite_dir) for r in refs]
