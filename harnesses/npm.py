"""Agent CLIs installed from npm: the ``NpmCli`` adapter base, the pinned install, its read-only mount, Node 24.

A new npm-installed harness subclasses ``NpmCli`` and declares ``package``, ``inside`` and ``entry``; it writes
``build_command`` (with ``cli``), ``build_env`` (with ``cli_env``) and its config files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from clawgym_env.errors import HarnessInstallError
from clawgym_env.harness import Harness, HarnessSession
from clawgym_env.harness_install import (
    NODE_PACKAGE,
    NODE_VERSION,
    install_node,
    install_npm_package,
    installed_root,
    is_installed,
    node_bin_dir,
)
from clawgym_env.sandbox.base import Mount

__all__ = ["NODE_INSIDE", "SANDBOX_PATH", "NpmCli", "base_env", "node_mount", "npm_install", "npm_mount", "pin_env", "pin_mount"]

NODE_INSIDE = "/opt/clawgym/node"
"""Where the pinned Node 24 is bind-mounted inside the sandbox."""

SANDBOX_PATH = "/opt/clawgym/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def base_env(home: str, path: str = SANDBOX_PATH, **extra: str) -> dict[str, str]:
    """The environment every CLI harness starts from: fixed HOME, PATH, locale and zone, no colours or TTY
    tricks (so prompts and transcripts are byte-stable), plus ``extra``."""
    return {"HOME": home, "PATH": path, "NO_COLOR": "1", "TERM": "dumb", "LANG": "C.UTF-8", "TZ": "UTC", **extra}


PIN_INSIDE = "/opt/clawgym/node-pin"
PIN_EPOCH_MS = 1_767_225_600_000
"""2026-01-01T00:00:00Z: where a pinned Node harness's wall clock starts."""


def pin_mount() -> Mount:
    """Read-only bind of ``node_pin/pin.cjs`` (the clock and UUID pin) at PIN_INSIDE."""
    return Mount(host=Path(__file__).resolve().parent / "node_pin", inside=PIN_INSIDE)


def pin_env(seed: str = "clawgym", rate: float = 0.0) -> dict[str, str]:
    """Environment that preloads the pin into every Node process of the episode (children inherit it).

    Two runs of a task then send byte-identical prompts where the harness prints the date, time or
    a random session id, so a replayed call has the recorded prompt ids and merges in the tree.
    ``rate`` 0 freezes Date at the epoch (a slow start-up under load would otherwise cross a minute
    stamp); timers and ``performance.now()`` are monotonic and unaffected.
    """
    return {
        "NODE_OPTIONS": f"--require={PIN_INSIDE}/pin.cjs",
        "CLAWGYM_PIN_EPOCH_MS": str(PIN_EPOCH_MS),
        "CLAWGYM_PIN_SEED": seed,
        "CLAWGYM_PIN_RATE": repr(rate),
    }


def node_mount(cache_dir: Path) -> Mount:
    """Read-only bind of the cached Node 24 package at NODE_INSIDE (installs it if needed)."""
    install_node(cache_dir)
    root = installed_root(NODE_PACKAGE, NODE_VERSION, cache_dir) / "node_modules" / NODE_PACKAGE
    return Mount(host=root, inside=NODE_INSIDE)


def npm_install(harness: Harness, package: str, cache_dir: Path, check: Sequence[str] = ()) -> Path:
    """npm-install ``package`` at the harness's pinned version, npm running on the cached Node 24
    (npm resolves ``engines`` and platform binaries against the Node that runs it)."""
    install_node(cache_dir)
    return install_npm_package(package, harness.version, cache_dir=cache_dir, check=check, path_prefix=node_bin_dir(cache_dir))


def npm_mount(harness: Harness, package: str, cache_dir: Path, inside: str) -> Mount:
    """Read-only bind of the pinned install at ``inside``; a clear error when it is not installed."""
    root = installed_root(package, harness.version, cache_dir)
    if not is_installed(package, harness.version, cache_dir):
        raise HarnessInstallError(
            f"{harness.name} {harness.version} is not installed in {root.parent}; run `clawgym harness install {harness.name}`"
        )
    return Mount(host=root, inside=inside)


class NpmCli(Harness):
    """An agent CLI installed from npm at the adapter's pinned ``version``, run read-only from ``inside``.

    ``entry`` is the file that runs, relative to the install (checked after installing): a JavaScript entry point
    run on the cached Node 24 (``on_node``), or a native binary the package ships (``on_node = False``).
    """

    package: ClassVar[str]
    """The npm package."""
    inside: ClassVar[str]
    """Where the install is bind-mounted in the sandbox."""
    entry: ClassVar[str]
    """What runs, relative to the install, e.g. ``node_modules/<package>/cli.js``."""
    on_node: ClassVar[bool] = True

    def install(self, cache_dir: Path) -> Path:
        return npm_install(self, self.package, cache_dir, check=[self.entry])

    def mounts(self, cache_dir: Path) -> tuple[Mount, ...]:
        own = npm_mount(self, self.package, cache_dir, self.inside)
        return (own, node_mount(cache_dir)) if self.on_node else (own,)

    def cli(self, *args: str) -> list[str]:
        """The command line that runs the CLI with ``args``."""
        entry = f"{self.inside}/{self.entry}"
        return [f"{NODE_INSIDE}/bin/node", entry, *args] if self.on_node else [entry, *args]

    def cli_env(self, session: HarnessSession, extra: Mapping[str, str], path: str | None = None) -> dict[str, str]:
        """``base_env`` for the episode (Node 24 first on PATH for a Node CLI) plus the CLI's own ``extra``."""
        default = f"{NODE_INSIDE}/bin:{SANDBOX_PATH}" if self.on_node else SANDBOX_PATH
        return base_env(session.home, path or default, **extra)
