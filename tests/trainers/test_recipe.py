"""The GPU recipe folder (trainers/recipes/qwen3-8b-8gpu): resolved without a GPU or weights, and its dry run,
which runs the same recipe at tiny scale on CPU (FSDP2 over 2 gloo processes, bf16, tree_flex, Claude Code and
OpenClaw, the rollout child with the gloo weight broadcast, a sharded checkpoint)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from clawgym_env.errors import ConfigError
from trainers.recipes.layout import load_layout
from trainers.recipes.plan import format_plan, resolve

RECIPE = Path(__file__).resolve().parents[2] / "trainers" / "recipes" / "qwen3-8b-8gpu"


def test_recipe_resolves_devices_shards_budgets_and_memory_from_its_config() -> None:
    plan = resolve(RECIPE)
    assert plan.shape.name == "Qwen3ForCausalLM" and 8.1e9 < plan.shape.params < 8.3e9  # Qwen3-8B's architecture
    assert plan.shards == 6 and plan.config.fsdp and plan.config.bf16 and plan.config.weight_sync == "broadcast"
    assert plan.config.harness_names == ["claude-code", "openclaw"] and plan.config.async_rollouts
    total = sum(plan.trainer_gib.values())
    assert 20 < total < 0.9 * plan.layout.gpu_memory_gib and not plan.warnings
    assert plan.trainer_gib["AdamW moments (sharded)"] == pytest.approx(8 * plan.shape.params / 6 / 2**30)
    assert plan.vllm_gib["full contexts"] >= 4
    assert plan.budget["episodes per step"] == 128 and plan.budget["forwards per trainer GPU per step"] >= 1
    text = format_plan(plan, "/models/Qwen3-8B")
    assert "CUDA_VISIBLE_DEVICES=2,3,4,5,6,7" in text and "--num_processes 6" in text and "--tensor-parallel-size 2" in text


def test_a_layout_mistake_names_the_file_and_field(tmp_path: Path) -> None:
    folder = tmp_path / "recipe"
    shutil.copytree(RECIPE, folder)
    layout = yaml.safe_load((folder / "layout.yaml").read_text())
    layout["trainer"]["gpus"] = [1, 2]
    (folder / "layout.yaml").write_text(yaml.safe_dump(layout))
    with pytest.raises(ConfigError, match=r"layout\.yaml: .*share a GPU"):
        load_layout(folder)
    layout["trainer"]["gpus"], layout["vllm"]["gpu_memory_utilization"] = [2], 1.5
    (folder / "layout.yaml").write_text(yaml.safe_dump(layout))
    with pytest.raises(ConfigError, match=r"layout\.yaml: vllm\.gpu_memory_utilization"):
        load_layout(folder)


def test_a_recipe_that_does_not_shard_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "recipe"
    shutil.copytree(RECIPE, folder)
    text = (folder / "recipe.yaml").read_text().replace("fsdp: true", "fsdp: false")
    (folder / "recipe.yaml").write_text(text)
    with pytest.raises(ConfigError, match="set fsdp: true"):
        resolve(folder)


@pytest.mark.slow
@pytest.mark.harness
@pytest.mark.sandbox
def test_recipe_dry_run_runs_the_recipe_tiny_on_cpu(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    from tests.harnesses.conftest import require_installed
    from trainers.recipes.launch import main

    for name in ("claude-code", "openclaw"):
        require_installed(name)
    assert main([str(RECIPE), "--dry-run", "--out", str(tmp_path / "run")]) == 0
    out = capfd.readouterr().out
    assert "6 shards of 1.37B parameters" in out and "KV cache" in out
    (summary,) = [line for line in out.splitlines() if line.startswith("tiny run: ")]
    assert "mismatch/claude-code=" in summary and "mismatch/openclaw=" in summary  # both harnesses trained
    assert "policy_version=1" in summary and "sync_s=" in summary  # updated, then broadcast to the rollout child
    assert "['__0_0.distcp', '__1_0.distcp']" in summary  # the checkpoint, one shard per process
    assert (tmp_path / "run" / "final" / "model" / "config.json").is_file()
