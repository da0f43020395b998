"""Fixtures for the env tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_tokenizer_dir() -> Path:
    """The shared tiny model folder (its tokenizer has a tools-capable chat template)."""
    from clawgym_env.models import tiny_model_path

    return tiny_model_path()
