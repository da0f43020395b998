"""Test helpers other packages import: the shared tiny model, built once per process.

Use ``tiny_model_path()`` directly, or wrap it in a session fixture::

    @pytest.fixture(scope="session")
    def tiny_model_dir() -> Path:
        return tiny_model_path()
"""

from __future__ import annotations

import functools
from pathlib import Path

from clawgym_env.models.tiny import DEFAULT_MAX_POSITIONS, build_tiny_model
from clawgym_env.models.tiny_moe import build_tiny_moe_model

__all__ = ["tiny_model_path", "tiny_moe_model_path"]


@functools.cache
def tiny_model_path(max_positions: int = DEFAULT_MAX_POSITIONS) -> Path:
    """The default tiny model folder (built on first use, then cached on disk and in memory).

    ``max_positions`` above the default gives the same model with a longer context (its own folder)."""
    return build_tiny_model(max_positions=max_positions)


@functools.cache
def tiny_moe_model_path(max_positions: int = DEFAULT_MAX_POSITIONS) -> Path:
    """The default tiny mixture-of-experts model folder (4 experts, top-2 per token; built once, then cached)."""
    return build_tiny_moe_model(max_positions=max_positions)
