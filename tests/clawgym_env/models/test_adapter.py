"""LoRA adapters as policies: ``hf:BASE?adapter=PATH``, ``hf:ADAPTER`` and ``default?adapter=`` serve the base with the
adapter merged in (the same logits as the peft model), and a wrong adapter is refused with the fix."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from clawgym_env.errors import ConfigError
from clawgym_env.models.adapter import adapter_base, base_name, is_adapter
from clawgym_env.models.testing import tiny_model_path
from clawgym_env.proxy.backends.factory import backend_from_spec


@pytest.fixture(scope="module")
def adapter(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, torch.Tensor]:
    """A LoRA adapter on the tiny model with random (non-zero) weights, saved with its base recorded as ``tiny``;
    and the logits of the peft model on a fixed input."""
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny_model_path()),
        LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"]),
    )
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.2)
    folder = tmp_path_factory.mktemp("adapter")
    model.save_pretrained(folder, save_embedding_layers=False)
    cfg = json.loads((folder / "adapter_config.json").read_text())
    (folder / "adapter_config.json").write_text(json.dumps({**cfg, "base_model_name_or_path": base_name(tiny_model_path())}))
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([[5, 9, 11, 40, 2, 7]])).logits
    return folder, logits


def logits_of(spec: str) -> torch.Tensor:
    backend = backend_from_spec(spec)
    try:
        with torch.no_grad():
            return backend.model(input_ids=torch.tensor([[5, 9, 11, 40, 2, 7]])).logits  # type: ignore[attr-defined]
    finally:
        asyncio.run(backend.aclose())


def test_the_adapter_folder_records_its_base_portably(adapter: tuple[Path, torch.Tensor]) -> None:
    folder, _ = adapter
    assert is_adapter(folder) and not is_adapter(tiny_model_path())
    assert json.loads((folder / "adapter_config.json").read_text())["base_model_name_or_path"] == "tiny"
    assert adapter_base(folder) == tiny_model_path()


def test_specs_with_an_adapter_serve_the_merged_model(adapter: tuple[Path, torch.Tensor]) -> None:
    folder, want = adapter
    base = logits_of("hf:tiny")
    assert float((base - want).abs().max()) > 1e-2  # the adapter changes the model
    for spec in (f"hf:tiny?adapter={folder}", f"hf:{tiny_model_path()}?adapter={folder}", f"hf:{folder}"):
        assert float((logits_of(spec) - want).abs().max()) < 1e-4, spec


def test_a_wrong_adapter_is_refused_with_the_fix(adapter: tuple[Path, torch.Tensor], tmp_path: Path) -> None:
    folder, _ = adapter
    with pytest.raises(ConfigError, match="not a LoRA adapter folder"):
        backend_from_spec(f"hf:tiny?adapter={tmp_path}")
    with pytest.raises(ConfigError, match="neither a Hugging Face model folder"):
        backend_from_spec(f"hf:{tmp_path}")
    with pytest.raises(ConfigError, match=r"does not fit the base model .*hf:BASE\?adapter=PATH"):
        backend_from_spec(f"default?adapter={folder}")  # a tiny-model adapter on SmolLM2
    bad = tmp_path / "orphan"
    bad.mkdir()
    (bad / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "/nowhere/model"}))
    with pytest.raises(ConfigError, match="hf:BASE\\?adapter=PATH"):
        backend_from_spec(f"hf:{bad}")
