"""Fixtures for the harness tests: the h6-smoke task suite and a check that a harness is installed."""

from __future__ import annotations

from pathlib import Path

import pytest

SMOKE_SUITE = Path(__file__).parent / "tasks" / "h6-smoke"


@pytest.fixture(scope="session")
def smoke_suite() -> Path:
    """Folder of the h6-smoke suite (hello-file, many-files); read-only."""
    return SMOKE_SUITE


def require_installed(name: str) -> None:
    """Fail (never skip) when a harness is not installed: a missing install is a broken setup."""
    from clawgym_env.harness_install import cache_root
    from clawgym_env.harness_registry import load_harness

    try:
        load_harness(name).mounts(cache_root())
    except Exception as exc:  # a missing install is a broken setup, not a skip
        pytest.fail(f"{name} is not installed ({exc}); run `clawgym harness install all` first")


@pytest.fixture
def claude_code_installed() -> None:
    require_installed("claude-code")


@pytest.fixture
def openclaw_installed() -> None:
    require_installed("openclaw")
