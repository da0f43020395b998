"""Shared pieces of the npm-installed adapters: where the Node runtime is mounted inside."""

from __future__ import annotations

from pathlib import Path

from clawgym_env.harness_install import NODE_PACKAGE, NODE_VERSION, install_node, installed_root
from clawgym_env.sandbox.base import Mount

__all__ = ["NODE_INSIDE", "SANDBOX_PATH", "node_mount"]

NODE_INSIDE = "/opt/clawgym/node"
"""Where the pinned Node 24 is bind-mounted inside the sandbox."""

SANDBOX_PATH = "/opt/clawgym/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def node_mount(cache_dir: Path) -> Mount:
    """Read-only bind of the cached Node 24 package at NODE_INSIDE (installs it if needed)."""
    install_node(cache_dir)
    root = installed_root(NODE_PACKAGE, NODE_VERSION, cache_dir) / "node_modules" / NODE_PACKAGE
    return Mount(host=root, inside=NODE_INSIDE)
