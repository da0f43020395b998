"""The experts a mixture-of-experts engine routed one call's tokens to: what routing replay (R3) trains with.

A MoE layer sends each token to ``top_k`` of its ``num_experts`` experts. The sampler and the
trainer can pick different experts for the same token (other kernels, batch shapes, precision),
so the trainer's logprobs would be of another network than the one that sampled. The engine
records, for each token it forwarded in a call, the expert indices of every MoE layer; the trainer
forwards with exactly those experts (``trainers/core/routing.py``).

Rows: row ``t`` is position ``t`` of the call's ``prompt_ids + completion_ids``, for every position
the engine forwarded: the whole prompt (a prefix reused from the engine's KV cache carries the
routing of the forward that computed it, since those keys and values came from it) and every
sampled token but the last, which was never fed back. A row holds ``layers x top_k`` indices in the
engine's order (uint8 while ``num_experts <= 256``, else uint16, little-endian): 4 bytes a token for
the tiny MoE (2 layers, top-2), 384 for Qwen3-30B-A3B (48 layers, top-8). In a capture line the
indices are base64, and format 2 stores only the rows an earlier call of the file did not hold
(``delta.py``).
"""

from __future__ import annotations

import base64
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["RoutedExperts"]


class RoutedExperts(BaseModel):
    """Expert indices of every MoE layer for each forwarded token of one call (rows, see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_bytes="base64")

    layers: int = Field(ge=1, description="MoE layers recorded, in model order.")
    top_k: int = Field(ge=1, description="Experts each token was routed to, per layer.")
    num_experts: int = Field(ge=1, le=65536, description="Experts per layer; every index is below it.")
    ids: bytes = Field(description="Row-major [tokens, layers, top_k] indices, uint8 (uint16 above 256 experts); base64 in a capture line.")

    @field_validator("ids", mode="before")
    @classmethod
    def _from_base64(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return base64.b64decode(value, validate=True)
            except ValueError as exc:
                raise ValueError(f"routing ids are not base64 ({exc})") from None
        return value

    @model_validator(mode="after")
    def _whole_rows(self) -> RoutedExperts:
        if len(self.ids) % self.row_bytes:
            raise ValueError(
                f"routing ids hold {len(self.ids)} bytes, not whole rows of {self.row_bytes} "
                f"({self.layers} layers x top-{self.top_k} x {self.itemsize} bytes)"
            )
        if self.ids and int(self.array().max()) >= self.num_experts:
            raise ValueError(f"routing holds expert index {int(self.array().max())}, but there are {self.num_experts} experts")
        return self

    @property
    def itemsize(self) -> int:
        """Bytes per index: 1 up to 256 experts, else 2."""
        return 1 if self.num_experts <= 256 else 2

    @property
    def row_bytes(self) -> int:
        """Bytes per token."""
        return self.layers * self.top_k * self.itemsize

    @property
    def tokens(self) -> int:
        """Rows: the positions the engine forwarded for this call."""
        return len(self.ids) // self.row_bytes

    def array(self) -> Any:
        """The indices as a read-only numpy array ``[tokens, layers, top_k]``."""
        import numpy as np

        dtype = np.uint8 if self.itemsize == 1 else np.dtype("<u2")
        return np.frombuffer(self.ids, dtype=dtype).reshape(-1, self.layers, self.top_k)

    @classmethod
    def from_array(cls, experts: Any, num_experts: int) -> RoutedExperts:
        """From integer indices ``[tokens, layers, top_k]`` (numpy, or a CPU torch tensor; any int dtype)."""
        import numpy as np

        arr = np.asarray(experts)
        if arr.ndim != 3:
            raise ValueError(f"routing indices must be [tokens, layers, top_k], got shape {arr.shape}")
        dtype = np.uint8 if num_experts <= 256 else np.dtype("<u2")
        return cls(layers=arr.shape[1], top_k=arr.shape[2], num_experts=num_experts, ids=np.ascontiguousarray(arr, dtype=dtype).tobytes())

    def head(self, rows: int) -> RoutedExperts:
        """The first ``rows`` rows."""
        return self.model_copy(update={"ids": self.ids[: rows * self.row_bytes]})

    def extended(self, tail: RoutedExperts) -> RoutedExperts:
        """These rows followed by ``tail``'s (same layers, top-k and expert count)."""
        if (tail.layers, tail.top_k, tail.num_experts) != (self.layers, self.top_k, self.num_experts):
            raise ValueError(
                f"routing of {tail.layers} layers x top-{tail.top_k} of {tail.num_experts} experts cannot "
                f"extend one of {self.layers} x top-{self.top_k} of {self.num_experts}"
            )
        return self.model_copy(update={"ids": self.ids + tail.ids})

    def shared_rows(self, other: RoutedExperts, limit: int) -> int:
        """How many leading rows (at most ``limit``) are the same in both."""
        if (other.layers, other.top_k, other.num_experts) != (self.layers, self.top_k, self.num_experts):
            return 0
        n = min(limit, self.tokens, other.tokens)
        a, b = self.array()[:n], other.array()[:n]
        differs = (a != b).reshape(n, -1).any(axis=1)
        return int(differs.argmax()) if bool(differs.any()) else n

    def line_json(self, skip_rows: int = 0) -> dict[str, Any]:
        """This routing as a capture line holds it, without its first ``skip_rows`` rows."""
        return {
            "layers": self.layers,
            "top_k": self.top_k,
            "num_experts": self.num_experts,
            "ids": base64.b64encode(self.ids[skip_rows * self.row_bytes :]).decode(),
        }
