"""The transfer experiment's pieces: the registered design, the template-clustered comparison, the shuffled-reward
control, checkpoint choice, and the gate that keeps the test split closed until the pre-registration is committed."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import pytest

from clawgym_env.errors import ConfigError
from clawgym_env.task import load_suite
from trainers.transfer.analysis import Cell, compare
from trainers.transfer.design import Design
from trainers.transfer.evaluate import best_checkpoint
from trainers.transfer.stages import registered


def test_the_full_design_splits_the_templates_into_disjoint_roles_over_real_tasks() -> None:
    d = Design.full()
    d.check()
    roles = [set(d.rl_templates), set(d.val_templates), set(d.test_templates)]
    assert [len(r) for r in roles] == [8, 2, 6] and not (roles[0] & roles[1] or roles[0] & roles[2] or roles[1] & roles[2])
    test = load_suite(d.test_suite).select(d.task_patterns("test").split(","))
    assert len(test) == 6 * 3 + 8 * 2 and {t.metadata["procgen"]["split"] for t in test} == {"test"}
    val = load_suite(d.train_suite).select(d.task_patterns("val").split(","))
    assert len(val) == 12 and {t.category for t in val} == roles[1]
    rl = load_suite(d.train_suite).select(d.rl_task_patterns().split(","))
    assert {t.category for t in rl} == roles[0] and {t.metadata["procgen"]["split"] for t in rl} == {"train"}
    assert Design.from_json(d.to_json()) == d
    assert [e.name for e in d.evaluations(d.arm("sft"), 0)] == ["test-greedy", "test-t0.3", "test-t0.6", "test-t1"]
    assert [e.name for e in d.evaluations(d.arm("sft"), 1)] == ["test-t0.3", "test-t0.6", "test-t1"]  # greedy is seed-free
    assert [e.name for e in d.evaluations(d.arm("rl"), 2)] == ["test-greedy", "test-t1"]
    bad = Design.full()
    bad.val_templates = [bad.test_templates[0]]
    with pytest.raises(ConfigError, match="more than one"):
        bad.check()


def _cells(rates: dict[str, list[float]], templates: int = 6, n: int = 10) -> dict[Cell, Any]:
    """Synthetic cells: arm -> per-template success rate, ``n`` scores a template (seed 0)."""
    out = {}
    for arm, per in rates.items():
        tree = {
            "types": {f"t{i}": {0: [1.0] * round(per[i] * n) + [0.0] * (n - round(per[i] * n))} for i in range(templates)},
            "variants": {},
        }
        out[Cell(arm, "t1", "h")] = tree
    return out


def test_compare_clusters_by_template_and_rechooses_the_best_control() -> None:
    cells = _cells({"rl": [0.9, 0.8, 0.9, 0.7, 0.8, 0.9], "sft": [0.2, 0.3, 0.1, 0.2, 0.3, 0.2], "more": [0.3, 0.2, 0.2, 0.2, 0.2, 0.1]})
    r = compare(cells, Cell("rl", "t1", "h"), [Cell("sft", "t1", "h"), Cell("more", "t1", "h")], "types", resamples=2000)
    assert r["best_control"]["arm"] == "sft" and abs(r["diff"] - (0.8333 - 0.2167)) < 1e-3
    assert r["ci95"][0] > 0.4 and r["p_one_sided"] < 0.05
    # one template carries the whole gain: the point estimate is positive, the clustered interval is not above zero
    cells = _cells({"rl": [1.0, 0.0, 0.0, 0.0, 0.0, 0.0], "sft": [0.0] * 6})
    r = compare(cells, Cell("rl", "t1", "h"), [Cell("sft", "t1", "h")], "types", resamples=2000)
    assert r["diff"] > 0.15 and r["ci95"][0] <= 0.0 and r["p_one_sided"] > 0.1
    # the control re-chosen per resample: two controls each best on half the templates make a tighter control
    cells = _cells({"rl": [0.5] * 6, "a": [0.9, 0.9, 0.9, 0.1, 0.1, 0.1], "b": [0.1, 0.1, 0.1, 0.9, 0.9, 0.9]})
    r = compare(cells, Cell("rl", "t1", "h"), [Cell("a", "t1", "h"), Cell("b", "t1", "h")], "types", resamples=2000)
    assert r["diff"] == pytest.approx(0.0, abs=1e-9) and r["ci95"][0] < -0.1


def test_the_later_checkpoint_wins_a_tie() -> None:
    assert best_checkpoint({5: 0.5, 10: 0.75, 15: 0.75, 20: 0.25}) == 15


def test_the_test_split_stays_closed_until_the_preregistration_is_committed(tmp_path: Path) -> None:
    out = tmp_path / "exp"
    out.mkdir()
    assert "no " in (registered(out) or "")
    (out / "PREREGISTRATION.md").write_text("plan\n")
    (out / "design.json").write_text("{}\n")
    assert registered(out) is None  # outside a git checkout the file is enough
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert "not committed" in (registered(out) or "")
    env = ["-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(["git", "-C", str(tmp_path), *env, "add", "."], check=True)
    subprocess.run(["git", "-C", str(tmp_path), *env, "commit", "-qm", "register"], check=True)
    assert registered(out) is None
    (out / "PREREGISTRATION.md").write_text("plan, changed after the fact\n")
    assert "not committed" in (registered(out) or "")


def test_shuffled_rewards_permute_each_groups_rewards_and_keep_the_logged_reward(real_batch: Any, tiny_path: Path, tmp_path: Path) -> None:
    """The control's advantages come from a permutation of each group's own rewards (the same values, other rollouts)."""
    from tests.trainers.conftest import make_config
    from trainers.transfer.arms import RLTrainer, ShuffledRewardTrainer

    plain = RLTrainer(make_config(tmp_path / "a"), tiny_path)
    shuffled = ShuffledRewardTrainer(make_config(tmp_path / "b"), tiny_path)
    try:
        batches = [copy.deepcopy(real_batch) for _ in range(2)]
        advs = []
        for trainer, batch in zip((plain, shuffled), batches, strict=True):
            slots, rollouts = trainer.slots(batch)
            trainer.pair_advantages(slots, batch, rollouts)
            advs.append(sorted(float(x) for s in slots for x in s.advantages))
        for g0, g1 in zip(real_batch.groups, batches[1].groups, strict=True):
            assert sorted(g0.rewards.values()) == sorted(g1.rewards.values()) and set(g0.rewards) == set(g1.rewards)
        assert batches[1].metrics["reward"] == real_batch.metrics["reward"]
        varied = [g for g in real_batch.groups if len(set(g.rewards.values())) > 1]
        assert varied  # the real batch has groups whose rewards differ, so a permutation can move credit
    finally:
        plain.close()
        shuffled.close()


def test_shared_bottom_gives_the_detached_trunk_logprobs_and_step(real_batch: Any, tiny_path: Path, tmp_path: Path) -> None:
    """Policy and reference over one shared frozen bottom (the adapter on the top layer only): the same logprobs for
    both models and the same loss, KL and gradient norm after a step as the plain detached-trunk forward."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from tests.trainers.conftest import make_config
    from trainers.core.lora import save_adapter
    from trainers.transfer.arms import RLTrainer
    from trainers.tree_grpo.trainer import TreeGRPOTrainer
    from trainers.tree_sft.forward import DetachedTrunkForward

    class Plain(DetachedTrunkForward, TreeGRPOTrainer):
        pass

    torch.manual_seed(0)
    start = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny_path),
        LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "up_proj"], layers_to_transform=[1]),
    )
    with torch.no_grad():
        for name, p in start.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.1)
    adapter = save_adapter(start, tmp_path / "adapter", tiny_path)
    cfg = {"use_peft": True, "beta": 0.1, "learning_rate": 1e-2}
    shared, plain = RLTrainer(make_config(tmp_path / "s", **cfg), adapter), Plain(make_config(tmp_path / "p", **cfg), adapter)
    try:
        assert shared.shared_bottom is not None and shared.shared_bottom.n == 1
        from clawgym_env.tree import pack_tree

        pack = pack_tree(real_batch.groups[0].tree)
        with torch.no_grad():
            for model in ("model", "ref_model"):
                a = shared.forward_logprobs(getattr(shared, model), pack)
                b = plain.forward_logprobs(getattr(plain, model), pack)
                assert float((a - b)[pack.loss_mask].abs().max()) < 1e-5, model
        ms, mp = shared.train_step(copy.deepcopy(real_batch)), plain.train_step(copy.deepcopy(real_batch))
        for key in ("loss", "kl", "grad_norm"):
            assert abs(ms[key] - mp[key]) <= 1e-5 * max(1.0, abs(mp[key])), (key, ms[key], mp[key])
        assert len(shared.shared_bottom.trunks) == 1 and not shared.shared_bottom.kept  # trunk kept, packs dropped
    finally:
        shared.close()
        plain.close()


def test_the_committed_registration_is_the_codes_full_design() -> None:
    """design.json and PREREGISTRATION.md under experiments/rl-transfer are what ``Design.full()`` writes: a change to
    the design in code without re-registering (or a registration edited by hand) fails here."""
    from trainers.transfer.prereg import preregistration

    out = Path(__file__).resolve().parents[2] / "experiments" / "rl-transfer"
    design, text = Design.full(), preregistration(Design.full())
    assert Design.load(out / "design.json") == design
    assert (out / "PREREGISTRATION.md").read_text() == text
    assert design.sft.look_first and "reading before it acts" in text
