"""Shared pytest fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawgym_env.models.testing import tiny_model_path


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    """The shared tiny Qwen3 model folder (built once, cached under ~/.cache/clawgym/models)."""
    return tiny_model_path()
