"""The TRL-shaped scripts: recipe + flags parse into our configs; one real PPO step end to end."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_recipe_and_flags_parse_into_tree_configs(monkeypatch: pytest.MonkeyPatch) -> None:
    from trainers.scripts import train_grpo, train_ppo

    monkeypatch.chdir(ROOT)
    argv = ["--config", "trainers/recipes/toy_grpo.yaml", "--harness", "custom,claude-code", "--mix-weights", "1,2", "--max_steps", "3"]
    script, cfg = train_grpo.make_parser().parse_args_and_config(argv)
    assert script.model_name_or_path == "tiny"
    assert cfg.harness_names == ["custom", "claude-code"] and cfg.harness_weights == [1.0, 2.0]
    assert cfg.max_steps == 3 and cfg.num_generations == 4 and cfg.report_to == ["tensorboard"]
    _, ppo = train_ppo.make_parser().parse_args_and_config(["--config", "trainers/recipes/toy_ppo.yaml"])
    assert type(ppo).__name__ == "TreePPOConfig" and ppo.value_warmup_steps == 2


@pytest.mark.sandbox
def test_ppo_script_runs_saves_and_logs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from trainers.scripts import train_ppo

    monkeypatch.chdir(ROOT)
    argv = [
        "--config",
        "trainers/recipes/toy_ppo.yaml",
        "--max_steps",
        "2",
        "--value_warmup_steps",
        "1",
        "--num_generations",
        "2",
        "--pairs_per_step",
        "1",
        "--save_steps",
        "1",
        "--output_dir",
        str(tmp_path),
    ]
    script, cfg = train_ppo.make_parser().parse_args_and_config(argv)
    trainer = train_ppo.main(script, cfg)
    assert [int(m["step"]) for m in trainer.history] == [1, 2]
    assert trainer.history[0]["value_warmup"] == 1.0 and trainer.history[1]["policy_version"] == 1.0
    assert (tmp_path / "checkpoint-1" / "trainer_state.json").is_file() and (tmp_path / "final" / "model").is_dir()
    assert list((tmp_path / "runs").rglob("events.out.tfevents.*"))


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--config", "nonexist.yaml"], "error: --config: cannot read nonexist.yaml"),
        (["--config", "trainers/recipes/toy_grpo.yaml", "--harness", "custm"], "did you mean 'custom'?"),
        (["--config", "trainers/recipes/toy_grpo.yaml", "--model_name_or_path", "./no-model"], "not a model folder"),
        (
            ["--config", "trainers/recipes/toy_grpo.yaml", "--is_cap", "3"],
            "is_cap was removed: the cap of the importance weight is TRL's --vllm_importance_sampling_clip_max",
        ),
        (["--config", "trainers/recipes/toy_grpo.yaml", "--skip-zero-variance", "false"], "--drop_zero_variance_from_loss true"),
    ],
)
def test_script_mistakes_are_one_error_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], words: str
) -> None:
    from trainers.scripts import train_grpo
    from trainers.scripts._common import run_script

    monkeypatch.chdir(ROOT)
    with pytest.raises(SystemExit) as info:
        run_script(train_grpo.make_parser, train_grpo.main, [*args, "--output_dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert info.value.code == 2 and words in err and "Traceback" not in err, err
    assert not list(tmp_path.iterdir())  # failed before any rollout or checkpoint
