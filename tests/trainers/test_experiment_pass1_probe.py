"""The Pass@1 experiment's RL task choice: a probe's attempts pick the templates whose rewards can
vary, RL's variants are train-split ones the SFT data never held, and the validation variants never
reach RL (the real procgen suites); its evaluation plan."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from clawgym_env.errors import ConfigError
from clawgym_env.results import AttemptResult
from clawgym_env.task import load_suite
from trainers.pass1 import STAGES, Size, evaluations, learnable_categories, reusable, rl_tasks
from trainers.scripts.experiment_pass1 import parse_args


def _attempt(category: str, variant: str, k: int, score: float) -> AttemptResult:
    return AttemptResult(
        task_id=f"procgen-train/{category}-{variant}",
        harness="claude-code-bash",
        attempt=k,
        category=category,
        status="passed" if score == 1.0 else "failed",
        score=score,
    )


def test_only_templates_solved_sometimes_are_learnable() -> None:
    attempts = [_attempt("copy-file", "05", k, 1.0) for k in range(4)]  # always: every group has one reward
    attempts += [_attempt("sum-column", "05", k, 0.0) for k in range(4)]  # never
    attempts += [_attempt("head-lines", "05", k, float(k == 2)) for k in range(4)]
    attempts += [_attempt("sort-numbers", v, 0, float(v == "06")) for v in ("05", "06")]  # mixed over variants
    assert learnable_categories(attempts) == ["head-lines", "sort-numbers"]
    assert learnable_categories([]) == []


def test_rl_tasks_keep_the_probed_templates_and_leave_out_validation() -> None:
    size = Size(val_tasks="*-20")
    every = rl_tasks(size, None)
    assert len(every) == 13 * 7 and not any(t.id.endswith("-20") for t in every)
    chosen = rl_tasks(size, ["head-lines", "sort-numbers"])
    assert {t.category for t in chosen} == {"head-lines", "sort-numbers"} and len(chosen) == 14
    assert len(rl_tasks(Size(val_tasks=""), ["head-lines"])) == 8  # no validation split: all 8 RL variants
    with pytest.raises(ConfigError, match="no train variant left for RL"):
        rl_tasks(Size(rl_tasks="*-20", val_tasks="*-20"), None)


def test_rl_probe_and_validation_use_train_variants_the_sft_data_never_held() -> None:
    """A policy tuned on procgen-train is right or wrong on those variants every time (memorised), so RL, its
    probe and its validation draw from procgen-train-rl: the same train pools, other variants, no held-out one."""
    size = Size()
    rl_suite = load_suite(size.rl_suite)
    probe, val, train = rl_suite.select(size.probe_tasks), rl_suite.select(size.val_tasks), rl_tasks(size, None)
    assert size.rl_suite == "procgen-train-rl" and len(probe) == 26 and len(val) == 13
    assert not {t.id for t in val} & {t.id for t in train} and {t.id for t in probe} <= {t.id for t in train}
    ids = {t.id for t in load_suite("procgen-train").tasks}
    assert not ids & {t.id for t in [*probe, *val, *train]}
    assert all(t.full_id.startswith("procgen-train-rl/") for t in train)  # (variants distinct: tests/.../test_procgen.py)
    quick = Size.quick()  # CI's slow tier: RL on the SFT variants, as before
    assert quick.rl_suite == "procgen-train" and len(rl_tasks(quick, None)) == 13 * 4


def test_every_stage_is_evaluated_greedily_and_sampled_at_rl_temperature() -> None:
    """GRPO maximizes the expected reward when sampling at ``rl_temperature``: each stage's held-out
    Pass@1 is measured that way too, beside (never instead of) greedy decoding."""
    size = Size(eval_samples=3, rl_temperature=0.7, eval_temperature=0.0, test_tasks="*-01", val_tasks="*-20")
    plan = {e.name: e for e in evaluations(size)}
    assert list(plan) == [*STAGES, *(f"{s}-sampled" for s in STAGES), "val-after-sft", "val-after-rl"]
    for stage in STAGES:
        greedy, sampled = plan[stage], plan[f"{stage}-sampled"]
        assert (greedy.stage, greedy.suite, greedy.tasks, greedy.attempts, greedy.temperature) == (stage, "procgen-test", "*-01", 1, 0.0)
        assert (sampled.stage, sampled.suite, sampled.tasks, sampled.attempts, sampled.temperature) == (
            stage,
            "procgen-test",
            "*-01",
            3,
            0.7,
        )
    assert {(plan[n].stage, plan[n].suite, plan[n].tasks) for n in ("val-after-sft", "val-after-rl")} == {
        ("after-sft", "procgen-train-rl", "*-20"),
        ("after-rl", "procgen-train-rl", "*-20"),
    }
    quick = Size.quick()  # CI's slow tier keeps its three greedy evaluations only
    assert [e.name for e in evaluations(quick)] == list(STAGES) and quick.eval_samples == 0


def test_command_line_sets_selection_and_sampled_attempts(tmp_path) -> None:
    out, work, size, reuse = parse_args(["--out", str(tmp_path), "--seed", "1", "--no-select", "--eval-samples", "1"])
    assert (out, work, size.seed, size.rl_select, size.eval_samples, reuse) == (tmp_path, tmp_path / "work", 1, False, 1, None)
    assert [e.attempts for e in evaluations(size) if e.name.endswith("-sampled")] == [1, 1, 1]
    _, _, default, _ = parse_args(["--out", str(tmp_path)])
    assert default == Size() and default.rl_select and default.eval_samples == 2


RECORDED = Path(__file__).resolve().parents[2] / "experiments" / "pass1-claude-code-bash" / "sft32" / "run2"


def test_reuse_before_takes_only_the_same_bench_run_complete(tmp_path, monkeypatch) -> None:
    """The committed seed-1 before-SFT runs are this seed's, never another seed's, size's, harness's or a partial one."""
    from clawgym_env.harness_registry import load_harness_class
    from clawgym_env.models import default_model_path

    model = default_model_path()
    _, _, size, reuse = parse_args(["--out", str(tmp_path), "--seed", "1", "--reuse-before", str(RECORDED)])
    before = {e.name: e for e in evaluations(size) if e.stage == "before"}
    assert reuse == RECORDED and set(before) == {"before", "before-sampled"}
    assert [reusable(RECORDED / name, e, model, size) for name, e in before.items()] == [None, None]
    size.seed = 0
    assert "seed=0" in reusable(RECORDED / "before", before["before"], model, size)
    size.seed, size.max_tokens = 1, 128
    assert "max_tokens 64 (this run: 128)" in reusable(RECORDED / "before", before["before"], model, size)
    size.max_tokens, size.test_tasks = 64, "*-01"
    assert "task_ids differ" in reusable(RECORDED / "before", evaluations(size)[0], model, size)
    size.test_tasks = Size().test_tasks
    with monkeypatch.context() as m:
        m.setattr(load_harness_class("claude-code-bash"), "version", "0.0.1")
        assert "'0.0.1'" in reusable(RECORDED / "before", before["before"], model, size)
    partial = shutil.copytree(RECORDED / "before", tmp_path / "before")
    next((partial / "attempts").iterdir()).unlink()
    assert reusable(partial, before["before"], model, size) == "25 of 26 attempts recorded"
    assert "no " in reusable(tmp_path / "nothing", before["before"], model, size)


def test_a_wrong_reuse_before_stops_the_run_before_any_training(tmp_path) -> None:
    from trainers.pass1 import run

    out, work, size, reuse = parse_args(["--out", str(tmp_path / "out"), "--seed", "0", "--reuse-before", str(RECORDED)])
    with pytest.raises(ConfigError, match=r"--reuse-before .*run2: before is not this run's evaluation: model .*seed=1"):
        run(out, work, size, reuse)
    assert not (work / "expert-dataset").exists() and not (out / "before").exists()
