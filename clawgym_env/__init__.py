"""ClawGym: train and evaluate LLM agents through real, unmodified agent harnesses."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
