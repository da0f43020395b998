"""Stratified RL task draws (every step's groups cover each template once), trained for real with the tiny
model through the custom harness; and the Pass@1 experiment's choice of the RL step best on validation."""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from clawgym_env.errors import ConfigError
from clawgym_env.task import load_suite
from tests.trainers.conftest import SUITE, make_config
from trainers.rollout import StratifiedTasks, sample_pairs
from trainers.pass1 import best_step
from trainers.tree_grpo.trainer import TreeGRPOTrainer


def test_every_round_of_draws_covers_each_template_once() -> None:
    tasks = load_suite("procgen-train").select("*-0[1-3]")  # 13 templates x 3 variants
    templates = sorted({t.category for t in tasks})
    strata, rng = StratifiedTasks(tasks), random.Random(0)
    variants = set()
    for _ in range(4):
        round_ = [strata.draw(rng) for _ in templates]
        assert sorted(t.category for t in round_) == templates
        variants.update(t.id for t in round_)
    assert len(variants) > len(templates)  # the variant within a template is drawn, not fixed
    uniform = sample_pairs(tasks, ["custom"], [1.0], len(templates), random.Random(0))
    assert len({t.category for t, _ in uniform}) < len(templates)  # what uniform draws of one step's size leave out
    with pytest.raises(ConfigError, match="no task"):
        StratifiedTasks([])


def _two_template_suite(root: Path) -> Path:
    """toy-rl with say-digits as a second template (category): two templates whose rewards the tiny model varies."""
    suite = root / "toy-rl"
    shutil.copytree(SUITE, suite)
    spec = suite / "say-digits" / "task.yaml"
    spec.write_text(spec.read_text().replace("category: content", "category: digits"))
    return suite


@pytest.mark.sandbox
def test_stratified_grpo_trains_every_template_every_step(tiny_path: Path, tmp_path: Path) -> None:
    suite = _two_template_suite(tmp_path)
    cfg = make_config(
        tmp_path / "run",
        suite=str(suite),
        task_sampling="stratified",
        pairs_per_step=2,
        num_generations=3,
        max_steps=3,
        learning_rate=1e-2,
        seed=1,
    )
    trainer = TreeGRPOTrainer(cfg, tiny_path)
    steps: list[list[str]] = []
    sample = trainer.rollout

    def recording() -> Any:
        batch = sample()
        steps.append(sorted(g.task_id.split("/")[-1] for g in batch.all_groups))
        return batch

    trainer.rollout = recording  # type: ignore[method-assign]
    start = [p.detach().clone() for p in trainer.model.parameters()]
    try:
        history = trainer.train()
    finally:
        trainer.close()
    assert steps == [["say-digits", "say-short"]] * 3, steps
    assert [h["policy_version"] for h in history] == [1.0, 2.0, 3.0] and all(h["grad_norm"] > 0 for h in history)
    assert any(not torch.equal(a, b) for a, b in zip(start, trainer.model.parameters(), strict=True))
    # seeded uniform draws of the same size put one template in both groups of some step
    tasks, rng = list(load_suite(suite).tasks), random.Random(1)
    assert any(len({t.id for t, _ in sample_pairs(tasks, ["custom"], [1.0], 2, rng)}) == 1 for _ in range(3))


def test_unknown_task_sampling_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="task_sampling"):
        make_config(tmp_path, task_sampling="round-robin")


def test_rl_keeps_the_step_best_on_validation_and_the_later_of_equals() -> None:
    assert best_step({1: 0.4, 2: 0.6, 3: 0.5}) == 2
    assert best_step({1: 0.5, 2: 0.3, 3: 0.5}) == 3
    assert best_step({1: 0.7, 2: 0.3}) == 1


@pytest.mark.sandbox
def test_every_rl_checkpoint_is_judged_on_validation_and_one_is_kept(tiny_path: Path, tmp_path: Path) -> None:
    """`select_rl_step` runs `clawgym bench run` on ``val_tasks`` for each ``checkpoint-<step>`` (a half-written
    ``.tmp`` is not one) and returns the kept step's model; a rerun reads ``selection.json`` instead."""
    import json

    from clawgym_env.runner import load_attempts
    from trainers.pass1 import Size, select_rl_step

    for name in ("checkpoint-1", "checkpoint-2", "checkpoint-3.tmp"):
        shutil.copytree(tiny_path, tmp_path / "rl" / name / "model")
    size = Size(harnesses="custom", val_tasks="write-number-20", max_tokens=8, eval_concurrency=1)
    final = tmp_path / "rl" / "final" / "model"
    assert select_rl_step(tmp_path, final, Size(harnesses="custom", val_tasks="")) == final  # no validation split: no choice
    kept = select_rl_step(tmp_path, final, size)
    chosen = json.loads((tmp_path / "rl" / "selection.json").read_text())
    assert set(chosen["scores"]) == {"1", "2"} and chosen["val_tasks"] == "write-number-20"
    for step in (1, 2):
        assert [a.task_id for a in load_attempts(tmp_path / "rl" / f"val-step-{step}")] == ["procgen-train-rl/write-number-20"]
    assert kept == tmp_path / "rl" / f"checkpoint-{chosen['step']}" / "model"
    shutil.rmtree(tmp_path / "rl" / "val-step-1")
    assert select_rl_step(tmp_path, final, size) == kept and not (tmp_path / "rl" / "val-step-1").exists()


def test_the_chosen_steps_validation_run_is_reused_as_val_after_rl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """select_rl_step already ran the greedy validation of the chosen checkpoint: run() copies it as val-after-rl
    instead of running that bench run again. The stages are stubbed here: only the plan's plumbing is under test
    (each stage has its real test above and in test_experiment_pass1.py)."""
    import json
    import types

    from trainers.pass1 import pipeline as E

    work, out = tmp_path / "work", tmp_path / "out"
    evaluated: list[str] = []

    def select(work: Path, final: Path, size: Any) -> Path:
        (work / "rl" / "val-step-2" / "attempts").mkdir(parents=True)
        (work / "rl" / "val-step-2" / "attempts" / "a.json").write_text("{}")
        (work / "rl" / "selection.json").write_text(json.dumps({"step": 2}))
        return work / "rl" / "checkpoint-2" / "model"

    def evaluate(stage: str, model: Path, target: Path, size: Any, **kw: Any) -> Path:
        evaluated.append(stage)
        target.mkdir(parents=True)
        return target

    for name, fn in {
        "build_model": lambda w, s: w / "base",
        "capture": lambda *a: None,
        "sft": lambda *a: work / "sft",
        "probe": lambda *a: ["t"],
        "rl": lambda *a: work / "rl" / "final",
        "select_rl_step": select,
        "evaluate": evaluate,
    }.items():
        monkeypatch.setattr(E, name, fn)
    monkeypatch.setattr(E, "subprocess", types.SimpleNamespace(run=lambda *a, **k: None))  # no bench compare
    size = E.Size()
    E.run(out, work, size)
    planned = [e.name for e in E.evaluations(size)]
    assert "val-after-rl" in planned and "val-after-rl" not in evaluated
    assert sorted(evaluated) == sorted(n for n in planned if n != "val-after-rl")
    assert (out / "val-after-rl" / "attempts" / "a.json").read_text() == "{}"
    assert json.loads((out / "experiment.json").read_text())["rl_selection"] == {"step": 2}
