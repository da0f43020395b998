"""Tree GRPO on real rollouts (custom harness, bwrap sandbox, in-process HF backend, tiny model)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import torch

from clawgym_env.proxy.backends.vllm import VLLMBackend
from clawgym_env.tree import pack_tree
from tests.trainers.conftest import TerseLoop, make_config
from trainers.core.losses import mismatch
from trainers.tree_grpo.trainer import TreeGRPOTrainer, rollout_advantages

pytestmark = pytest.mark.sandbox


def rollout_logprob(trainer: TreeGRPOTrainer, tree: Any, episode: str) -> float:
    """Summed logprob, under the trainer's model, of the tokens ``episode`` sampled."""
    pack = pack_tree(tree)
    with torch.no_grad():
        lp = trainer.forward_logprobs(trainer.model, pack)
    mine = pack.sampler_token[pack.sampler_rollout == pack.rollout_ids.index(episode)]
    return float(lp[mine].sum())


def test_captures_are_exact_at_step_zero(real_batch: Any, tiny_path: Path, tmp_path: Path) -> None:
    """Trainer logprobs on sampled tokens match the backend's within 1e-3: no re-tokenisation anywhere."""
    assert len(real_batch.groups) == 2
    for group in real_batch.groups:
        assert group.tree is not None and len(group.tree.episodes) == 4
        assert group.statuses == {"completed": 4}
    trainer = TreeGRPOTrainer(make_config(tmp_path), tiny_path)
    worst = 0.0
    for group in real_batch.groups:
        pack = pack_tree(group.tree)
        with torch.no_grad():
            lp = trainer.forward_logprobs(trainer.model, pack)
        assert pack.num_loss_tokens > 0
        worst = max(worst, float((lp - pack.rollout_logprobs)[pack.loss_mask].abs().max()))
        assert mismatch(lp, pack.rollout_logprobs, pack.loss_mask) < 1e-3
    assert worst < 1e-3
    metrics = trainer.train_step(copy.deepcopy(real_batch))
    assert metrics["mismatch"] < 1e-3 and metrics["mismatch/custom"] < 1e-3
    assert metrics["trainable_tokens"] == sum(g.tree.num_trainable for g in real_batch.groups)
    assert metrics["policy_version"] == 1.0 and metrics["grad_norm"] > 0


def test_positive_advantage_raises_the_logprob_of_its_completions(real_batch: Any, tiny_path: Path, tmp_path: Path) -> None:
    batch = copy.deepcopy(real_batch)
    group = batch.groups[0]
    best, *rest = group.tree.episodes
    group.rewards = {ep: (1.0 if ep == best else 0.0) for ep in group.tree.episodes}
    batch.groups = [group]
    adv = rollout_advantages(batch)
    assert adv[(0, best)] > 0 and all(adv[(0, ep)] < 0 for ep in rest)
    trainer = TreeGRPOTrainer(make_config(tmp_path, learning_rate=3e-3), tiny_path)
    before = {ep: rollout_logprob(trainer, group.tree, ep) for ep in group.tree.episodes}
    trainer.train_step(batch)
    after = {ep: rollout_logprob(trainer, group.tree, ep) for ep in group.tree.episodes}
    assert after[best] > before[best] + 1e-3
    assert sum(after[ep] for ep in rest) < sum(before[ep] for ep in rest)


def test_update_is_synced_to_the_backend_and_captures_carry_the_version(tiny_path: Path, tmp_path: Path) -> None:
    """A full step (rollout + update): captures say version 0, the backend then serves version 1 weights."""
    trainer = TreeGRPOTrainer(make_config(tmp_path, pairs_per_step=1, num_generations=2), tiny_path)
    history = trainer.train(steps=1)
    assert history[0]["policy_version"] == 1.0 and history[0]["mismatch"] < 1e-3
    backend = trainer.backend
    assert backend.policy_version == 1
    for name, p in trainer.model.state_dict().items():
        assert torch.equal(p, backend.model.state_dict()[name]), name
    batch = trainer.rollout()
    assert batch.policy_version == 1 and {v for g in batch.all_groups for v in g.versions} == {1}
    assert history[0]["policy_lag/max"] == 0.0


def test_mix_harness_batch_has_one_group_per_pair_with_its_own_advantages(tiny_path: Path, tmp_path: Path) -> None:
    cfg = make_config(tmp_path, harness="custom,custom-terse", mix_weights="1,1", pairs_per_step=4, num_generations=2, seed=3)
    trainer = TreeGRPOTrainer(cfg, tiny_path, harness_adapters={"custom-terse": TerseLoop()})
    batch = trainer.rollout()
    harnesses = {g.harness for g in batch.all_groups}
    assert harnesses == {"custom", "custom-terse"}, harnesses
    adv = rollout_advantages(batch)
    for gi, g in enumerate(batch.groups):
        values = [adv[(gi, sid)] for sid in g.rewards]
        assert abs(sum(values)) < 1e-4  # centred within the group, not across the batch
        assert all(sid.startswith(g.harness + "-") for sid in g.rewards)
    metrics = trainer.train_step(batch)
    assert {"reward/custom", "reward/custom-terse"} <= set(metrics)
    assert {k for k in metrics if k.startswith("mismatch/")} == {f"mismatch/{g.harness}" for g in batch.groups}


def test_resume_continues_the_same_run(real_batch: Any, tiny_path: Path, tmp_path: Path) -> None:
    cfg = make_config(tmp_path / "run", beta=0.05, max_steps=10)
    a = TreeGRPOTrainer(cfg, tiny_path)
    first = copy.deepcopy(real_batch)
    first.groups = first.groups[:1]
    second = copy.deepcopy(real_batch)
    second.groups = second.groups[1:]
    a.train_step(first)
    a.step = 1
    a.rng.random()  # as if pairs had been sampled: the sampler's state must come back too
    ckpt = a.save_checkpoint()
    assert ckpt.name == "checkpoint-1"
    expected = a.train_step(copy.deepcopy(second))
    b = TreeGRPOTrainer(cfg, tiny_path, resume_from_checkpoint=ckpt)
    assert (b.step, b.policy_version) == (1, 1) and b.rng.getstate() == a.rng.getstate()
    got = b.train_step(copy.deepcopy(second))
    assert got["loss"] == pytest.approx(expected["loss"], abs=1e-7) and got["kl"] == pytest.approx(expected["kl"], abs=1e-9)
    assert expected["kl"] > 0  # the loss depends on the weights reached, not only on the batch
    for (name, pa), pb in zip(a.model.named_parameters(), b.model.parameters(), strict=True):
        assert torch.allclose(pa, pb, atol=1e-7), name  # same optimizer moments -> same update
    # without the optimizer state the same step lands elsewhere
    c = TreeGRPOTrainer(cfg, tiny_path, resume_from_checkpoint=ckpt)
    c.optimizer = torch.optim.AdamW(c.model.parameters(), lr=cfg.learning_rate)
    c.scheduler = c._scheduler(c.optimizer)
    c.train_step(copy.deepcopy(second))
    assert any(not torch.allclose(pa, pc, atol=1e-7) for pa, pc in zip(a.model.parameters(), c.model.parameters(), strict=True))


def test_num_iterations_reuses_the_batch_with_ratios_against_the_first_pass(real_batch: Any, tiny_path: Path, tmp_path: Path) -> None:
    trainer = TreeGRPOTrainer(make_config(tmp_path, num_iterations=3, learning_rate=1e-2, epsilon=0.01), tiny_path)
    metrics = trainer.train_step(copy.deepcopy(real_batch))
    state = trainer.optimizer.state_dict()["state"]
    assert {int(v["step"]) for v in state.values()} == {3}  # three AdamW steps on one batch
    assert metrics["policy_version"] == 1.0  # one sync per batch, not per iteration
    assert trainer.scheduler.get_last_lr()[0] == pytest.approx(1e-2 * (1 - 3 / 12))  # linear over 4 steps x 3


def test_eval_every_n_steps_runs_the_held_out_split(tiny_path: Path, tmp_path: Path) -> None:
    from tests.trainers.conftest import SUITE

    cfg = make_config(
        tmp_path,
        tasks="say-short",
        eval_suite=str(SUITE),
        eval_tasks="say-digits",
        eval_every_steps=1,
        eval_episodes=2,
        pairs_per_step=1,
        num_generations=2,
        report_to="tensorboard",
    )
    trainer = TreeGRPOTrainer(cfg, tiny_path)
    history = trainer.train(steps=1)
    m = history[0]
    assert m["eval/episodes"] == 2.0 and 0.0 <= m["eval/reward"] <= 1.0
    assert m["eval/reward/custom"] == m["eval/reward"] and "eval/pass_rate" in m
    assert list((tmp_path / "runs").rglob("events.out.tfevents.*"))
    trainer.close()


class FakeServerBackend(VLLMBackend):
    """FAKE stand-in for a vLLM server (none can run here): records the folder it was told to reload."""

    def __init__(self) -> None:
        super().__init__("http://127.0.0.1:9", "policy")
        self.reloads: list[tuple[Path, int]] = []

    async def reload_weights(self, path: Path, version: int) -> None:
        self.reloads.append((Path(path), version))
        self.policy_version = version


def test_server_backends_reload_a_saved_folder_after_each_update(real_batch: Any, tiny_path: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    fake = FakeServerBackend()
    trainer = TreeGRPOTrainer(make_config(tmp_path), tiny_path, backend=fake)
    trainer.train_step(copy.deepcopy(real_batch))
    assert [v for _, v in fake.reloads] == [1] and fake.policy_version == 1
    folder = fake.reloads[0][0]
    saved = AutoModelForCausalLM.from_pretrained(folder)
    for name, p in trainer.model.state_dict().items():
        assert torch.equal(p, saved.state_dict()[name]), name


def test_bf16_autocasts_over_fp32_master_weights(real_batch: Any, tiny_path: Path, tmp_path: Path) -> None:
    """bf16 is accelerate's autocast: the weights AdamW updates stay fp32 (TRL's master weights)."""
    trainer = TreeGRPOTrainer(make_config(tmp_path, bf16=True, use_cpu=True, learning_rate=1e-6), tiny_path)
    assert trainer.accelerator.mixed_precision == "bf16"
    before = {n: p.detach().clone() for n, p in trainer.policy.named_parameters()}
    metrics = trainer.train_step(copy.deepcopy(real_batch))
    assert metrics["optimizer_step"] == 1.0
    changed = [n for n, p in trainer.policy.named_parameters() if not torch.equal(p, before[n])]
    assert all(p.dtype == torch.float32 for p in trainer.policy.parameters())
    assert changed  # a 1e-6 step moves fp32 weights (in bf16 most of it would round away)
    assert max(float((p.detach() - before[n]).abs().max()) for n, p in trainer.policy.named_parameters()) < 1e-4


def test_save_steps_as_a_fraction_of_max_steps(tiny_path: Path, tmp_path: Path) -> None:
    """--save_steps 0.5 with --max_steps 2 saves after step 1 and step 2 (was: ZeroDivisionError)."""
    cfg = make_config(tmp_path, save_steps=0.5, max_steps=2, pairs_per_step=1, num_generations=2)
    trainer = TreeGRPOTrainer(cfg, tiny_path)
    try:
        trainer.train()
    finally:
        trainer.close()
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    assert trainer.every(0.5) == 1 and trainer.every(0.26) == 1 and trainer.every(3) == 3 and trainer.every(0) == 0


def test_lora_trains_only_the_adapter_and_the_backend_samples_with_merged_weights(real_batch: Any, tiny_path: Path, tmp_path: Path) -> None:
    """--use_peft: only lora_* parameters move; after the sync the backend's captured logprobs equal the trainer's."""
    cfg = make_config(tmp_path, use_peft=True, lora_r=4, lora_alpha=8, learning_rate=3e-2, pairs_per_step=1, num_generations=2)
    trainer = TreeGRPOTrainer(cfg, tiny_path)
    try:
        before = {n: p.detach().clone() for n, p in trainer.policy.named_parameters()}
        metrics = trainer.train_step(copy.deepcopy(real_batch))
        assert metrics["optimizer_step"] == 1.0 and metrics["mismatch"] < 1e-4  # the adapter starts at zero
        trainable = {n for n, p in trainer.policy.named_parameters() if p.requires_grad}
        changed = {n for n, p in trainer.policy.named_parameters() if not torch.equal(p.detach(), before[n])}
        assert trainable and all(".lora_" in n for n in trainable)
        assert changed and changed <= trainable
        batch = trainer.rollout()  # sampled by the backend after the sync, with version 1
        assert {v for g in batch.all_groups for v in g.versions} == {1}
        for group in batch.groups or [g for g, _ in batch.skipped if g.tree is not None]:
            pack = pack_tree(group.tree)
            with torch.no_grad():
                lp = trainer.forward_logprobs(trainer.model, pack)
            assert float((lp - pack.rollout_logprobs)[pack.loss_mask].abs().max()) < 1e-4
        base = TreeGRPOTrainer(make_config(tmp_path / "base"), tiny_path)  # the merged weights are not the base model's
        group = (batch.groups or [g for g, _ in batch.skipped if g.tree is not None])[0]
        pack = pack_tree(group.tree)
        with torch.no_grad():
            base_lp = base.forward_logprobs(base.model, pack)
        assert float((base_lp - pack.rollout_logprobs)[pack.loss_mask].abs().max()) > 1e-3
    finally:
        trainer.close()
