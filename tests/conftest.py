"""Shared pytest fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawgym_env.models.testing import tiny_model_path


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    """The shared tiny Qwen3 model folder (built once, cached under ~/.cache/clawgym/models)."""
    return tiny_model_path()


def shared_data_dir() -> Path:
    """The read-only real task data (../shared/data beside the checkout; CLAWGYM_SHARED_DATA overrides)."""
    import os

    env = os.environ.get("CLAWGYM_SHARED_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def clawgym_sample_dir() -> Path:
    """The 60 real ClawGym sample tasks."""
    path = shared_data_dir() / "clawgym-sample"
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: real task data missing; set CLAWGYM_SHARED_DATA to the shared/data folder")
    return path
