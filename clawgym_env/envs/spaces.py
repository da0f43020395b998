"""Gymnasium spaces for model turns: unicode text and token-id sequences."""

from __future__ import annotations

import string
from typing import Any

from gymnasium import spaces

__all__ = ["MAX_TEXT", "UnicodeText", "token_ids_space"]

MAX_TEXT = 16_000_000
"""Longest text an observation or action may hold (characters): a long agent context as JSON."""


class UnicodeText(spaces.Text):
    """A ``Text`` space that holds any unicode string up to ``max_length``.

    Model turns contain arbitrary unicode, which ``Text``'s finite ``charset`` cannot express;
    membership here only checks type and length. ``sample()`` still draws printable ASCII.
    """

    def __init__(self, max_length: int = MAX_TEXT, *, min_length: int = 0, seed: int | None = None) -> None:
        super().__init__(max_length=max_length, min_length=min_length, charset=string.printable, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        if mask is None and probability is None:  # keep samples short: an action is one model turn
            length = int(self.np_random.integers(self.min_length, min(self.max_length, 64) + 1))
            mask = (length, None)
        return super().sample(mask=mask, probability=probability)

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"


def token_ids_space(vocab_size: int) -> spaces.Sequence:
    """A variable-length tuple of token ids below ``vocab_size``."""
    return spaces.Sequence(spaces.Discrete(vocab_size))
