"""Training as a LoRA adapter: tree SFT saves only the adapter (on the layers above the frozen ones), a run started
from an adapter folder keeps training that adapter (SFT, then GRPO), and what either saves loads as a policy."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from clawgym_env._sync import run_sync
from clawgym_env.models.adapter import load_merged
from clawgym_env.proxy.backends.factory import backend_from_spec
from clawgym_env.tree import pack_tree
from tests.trainers.conftest import make_config
from trainers.tree_sft.config import TreeSFTConfig


@pytest.fixture(scope="module")
def dataset(tiny_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Expert episodes of three procgen tasks through the real custom harness (tiny tokenizer)."""
    from transformers import AutoTokenizer

    from clawgym_env.task import load_suite
    from trainers.tree_sft.expert import capture_experts, write_dataset

    tasks = load_suite("procgen-train").select(["write-number-0[12]", "copy-file-01"])
    results = run_sync(capture_experts(tasks, ["custom"], AutoTokenizer.from_pretrained(tiny_path), concurrency=3))
    out = tmp_path_factory.mktemp("ds") / "ds"
    write_dataset(results, out)
    return out


def logits(model: Any, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0]


def test_tree_sft_with_lora_saves_an_adapter_that_loads_as_the_trained_policy(tiny_path: Path, dataset: Path, tmp_path: Path) -> None:
    from trainers.tree_sft.trainer import TreeSFTTrainer

    cfg = TreeSFTConfig(
        output_dir=str(tmp_path / "sft"),
        dataset_path=str(dataset),
        max_steps=6,
        learning_rate=3e-2,
        packs_per_step=1,
        use_cpu=True,
        logging_steps=100,
        frozen_layers=1,
        use_peft=True,
        lora_r=4,
        lora_alpha=8,
    )
    trainer = TreeSFTTrainer(cfg, tiny_path)
    trainable = {n for n, p in trainer.model.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_" in n and ".layers.1." in n for n in trainable)  # above the frozen layer only
    history = trainer.train()
    assert history[-1]["loss"] < history[0]["loss"]
    saved = trainer.save()
    assert sorted(p.name for p in saved.iterdir()) == ["adapter_config.json", "adapter_model.safetensors", "sft_state.json"]
    assert json.loads((saved / "adapter_config.json").read_text())["base_model_name_or_path"] == "tiny"
    ids = [5, 9, 11, 40, 2, 7]
    backend = backend_from_spec(f"hf:{saved}")
    try:
        assert float((logits(backend.model, ids) - logits(trainer.model, ids)).abs().max()) < 1e-4  # type: ignore[attr-defined]
    finally:
        asyncio.run(backend.aclose())
    more = TreeSFTTrainer(
        TreeSFTConfig(
            output_dir=str(tmp_path / "more"),
            dataset_path=str(dataset),
            max_steps=2,
            learning_rate=3e-2,
            packs_per_step=1,
            use_cpu=True,
            logging_steps=100,
            frozen_layers=1,
            use_peft=True,
        ),
        saved,
    )  # continues the saved adapter, whatever the LoRA flags say
    assert float((logits(more.model, ids) - logits(trainer.model, ids)).abs().max()) < 1e-5
    assert {n for n, p in more.model.named_parameters() if p.requires_grad} == trainable


def test_grpo_from_an_adapter_folder_trains_that_adapter_against_it_as_reference(tiny_path: Path, real_batch: Any, tmp_path: Path) -> None:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from trainers.core.lora import save_adapter
    from trainers.tree_grpo.trainer import TreeGRPOTrainer

    torch.manual_seed(0)
    start = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_path), LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))
    with torch.no_grad():
        for name, p in start.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.1)
    folder = save_adapter(start, tmp_path / "adapter", tiny_path)
    merged = load_merged(tiny_path, folder)
    trainer = TreeGRPOTrainer(make_config(tmp_path / "rl", use_peft=True, learning_rate=3e-2, beta=0.1), folder)
    try:
        pack = pack_tree(real_batch.groups[0].tree)
        with torch.no_grad():
            policy, ref = trainer.forward_logprobs(trainer.model, pack), trainer.forward_logprobs(trainer.ref_model, pack)
        plain = merged.eval()
        full = pack.token_logprobs(plain(**pack.model_inputs("bool")).logits[0].float())
        m = pack.loss_mask
        assert float((policy - full)[m].abs().max()) < 1e-4 and float((ref - full)[m].abs().max()) < 1e-4
        before = {n: p.detach().clone() for n, p in trainer.policy.named_parameters()}
        metrics = trainer.train_step(copy.deepcopy(real_batch))
        assert metrics["optimizer_step"] == 1.0 and metrics["kl"] < 1e-6  # the reference is the starting adapter
        changed = {n for n, p in trainer.policy.named_parameters() if not torch.equal(p.detach(), before[n])}
        assert changed and all(".lora_" in n for n in changed)
        ckpt = trainer.save_checkpoint()
        backend = backend_from_spec(f"hf:{ckpt / 'model'}")
        try:
            ids = [5, 9, 11, 40, 2, 7]
            assert float((logits(backend.model, ids) - logits(trainer.policy, ids)).abs().max()) < 1e-4  # type: ignore[attr-defined]
            assert float((logits(backend.model, ids) - logits(plain, ids)).abs().max()) > 1e-4  # it trained
        finally:
            asyncio.run(backend.aclose())
    finally:
        trainer.close()
