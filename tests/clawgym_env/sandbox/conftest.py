"""Fixtures for sandbox tests: a ``make`` factory that closes every sandbox it created."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from clawgym_env.sandbox import Sandbox, SandboxConfig, create_sandbox

BACKENDS = [
    pytest.param("bwrap", marks=pytest.mark.sandbox),
    pytest.param("docker", marks=[pytest.mark.sandbox, pytest.mark.docker]),
]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def make(backend: str) -> AsyncIterator[Callable[..., object]]:
    """``await make(**config_fields)`` -> a started sandbox of the parametrized backend."""
    made: list[Sandbox] = []

    async def _make(**fields: object) -> Sandbox:
        sb = create_sandbox(backend, SandboxConfig(**fields))  # type: ignore[arg-type]
        await sb.start()
        made.append(sb)
        return sb

    yield _make
    for sb in made:
        await sb.close()


def processes_with(marker: str) -> list[int]:
    """Host pids whose command line contains ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(entry))
    return found


async def wait_for_daemon(marker: str) -> None:
    """Poll (up to about 5 s) until a host process's command line contains ``marker``; fail if none does."""
    for _ in range(100):
        await asyncio.sleep(0.05)
        if processes_with(marker):
            break
    assert processes_with(marker), "daemon did not start"
