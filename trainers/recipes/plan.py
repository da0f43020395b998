"""A recipe resolved: its flags checked as the trainer checks them, devices, shards, batch and token budgets,
memory per GPU, and the commands that launch it."""

from __future__ import annotations

import math
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawgym_env.errors import ConfigError
from trainers.recipes.layout import Layout, load_layout
from trainers.recipes.memory import ModelShape, model_shape, trainer_memory, vllm_memory
from trainers.tree_grpo.fields import explain_unknown

__all__ = ["Plan", "accelerate_launch", "format_plan", "parse_recipe", "resolve"]

ROOT = Path(__file__).resolve().parents[2]
TRAIN_SCRIPT = ROOT / "trainers" / "scripts" / "train_grpo.py"


def parse_recipe(folder: Path, overrides: list[str]) -> tuple[Any, Any]:
    """``recipe.yaml`` through the training script's own parser (``TrlParser``), ``overrides`` as flags after it."""
    from trainers.scripts.train_grpo import make_parser

    recipe = folder / "recipe.yaml"
    if not recipe.is_file():
        raise ConfigError(f"{folder}: no recipe.yaml; a recipe folder holds recipe.yaml, layout.yaml and config.json")
    try:
        return make_parser().parse_args_and_config(["--config", str(recipe), *overrides])
    except (ValueError, SystemExit) as exc:
        raise ConfigError(f"{recipe}: {explain_unknown(str(exc))}") from None


@dataclass(frozen=True)
class Plan:
    """Everything a launch decides, before anything starts."""

    folder: Path
    layout: Layout
    config: Any  # TreeGRPOConfig
    shape: ModelShape
    trainer_gib: dict[str, float]
    vllm_gib: dict[str, float]
    budget: dict[str, float]
    warnings: list[str] = field(default_factory=list)

    @property
    def shards(self) -> int:
        return len(self.layout.trainer.gpus)

    def vllm_args(self) -> list[str]:
        v = self.layout.vllm
        return [
            "--tensor-parallel-size",
            str(len(v.gpus)),
            "--gpu-memory-utilization",
            str(v.gpu_memory_utilization),
            "--max-model-len",
            str(v.max_model_len),
            "--dtype",
            "bfloat16",
        ]

    def trainer_command(self, model: str) -> list[str]:
        """The trainer's launch: one process per trainer GPU, sampling from the vLLM server."""
        url = f"http://127.0.0.1:{self.layout.vllm.port}"
        return [
            *accelerate_launch(self.shards),
            "--config",
            str(self.folder / "recipe.yaml"),
            "--model_name_or_path",
            model,
            "--rollout_backend",
            f"vllm:{url}#{model}",
        ]


def accelerate_launch(processes: int, *extra: str) -> list[str]:
    """``accelerate launch`` of the GRPO trainer script over ``processes`` processes on one machine, with
    ``extra`` launcher options (a rendezvous address); the trainer's own arguments follow. One command line for
    the recipe's GPU launch and its tiny CPU run, so the tiny run checks the launch the recipe prints."""
    return [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--multi_gpu",
        "--num_processes",
        str(processes),
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        *extra,
        str(TRAIN_SCRIPT),
    ]


def _budget(layout: Layout, config: Any, shards: int) -> dict[str, float]:
    b = layout.budget
    gens = int(config.num_generations)
    tree = b.shared_prompt_tokens + gens * b.episode_tokens  # a group's prefix tree: the shared prompt counted once
    packs_per_group = math.ceil(tree / config.pack_max_tokens) if config.pack_max_tokens else 1
    packs = packs_per_group * config.pairs_per_step
    return {
        "episodes per step": gens * config.pairs_per_step,
        "groups per step": config.pairs_per_step,
        "tree tokens per group": tree,
        "pack tokens (max)": config.pack_max_tokens or tree,
        "packs per step": packs,
        "forwards per trainer GPU per step": math.ceil(packs / shards),
    }


def resolve(folder: Path, model: str | None = None) -> Plan:
    """Read and check the recipe folder; nothing starts."""
    layout = load_layout(folder)
    if not (folder / "config.json").is_file():
        raise ConfigError(f"{folder}: no config.json (the model's architecture; weights are not needed to plan)")
    # the GPU run's flags, checked on any machine: TrainingArguments refuses bf16 without a GPU unless use_cpu
    _, config = parse_recipe(folder, [*(["--model_name_or_path", model] if model else []), "--use_cpu", "true"])
    if not config.fsdp:
        raise ConfigError(f"{folder / 'recipe.yaml'}: fsdp is off; a multi-GPU recipe shards the policy (set fsdp: true)")
    shape = model_shape(folder)
    shards = len(layout.trainer.gpus)
    chunk = config.logprob_chunk_size or shape.vocab
    trainer = trainer_memory(
        shape,
        shards=shards,
        pack_tokens=int(config.pack_max_tokens or layout.vllm.max_model_len),
        chunk=chunk,
        checkpointing=bool(config.activation_checkpointing),
    )
    vllm = vllm_memory(
        shape,
        tensor_parallel=len(layout.vllm.gpus),
        gpu_gib=layout.gpu_memory_gib,
        utilization=layout.vllm.gpu_memory_utilization,
        max_model_len=layout.vllm.max_model_len,
    )
    warnings = []
    if sum(trainer.values()) > 0.9 * layout.gpu_memory_gib:
        warnings.append(
            f"trainer: ~{sum(trainer.values()):.0f} GiB of {layout.gpu_memory_gib:.0f} per GPU; lower pack_max_tokens or add trainer GPUs"
        )
    if vllm["full contexts"] < 1:
        warnings.append(
            f"vLLM: the KV cache holds {vllm['KV tokens']:.0f} tokens, less than one {layout.vllm.max_model_len}-"
            "token context; raise gpu_memory_utilization or add vLLM GPUs"
        )
    return Plan(folder, layout, config, shape, trainer, vllm, _budget(layout, config, shards), warnings)


def format_plan(plan: Plan, model: str) -> str:
    """The resolved run as text: devices, shards, budgets, memory per GPU, the commands."""
    c, lay, s = plan.config, plan.layout, plan.shape
    v = plan.vllm_gib
    lines = [
        f"recipe {plan.folder}",
        f"model  {s.name}: {s.params / 1e9:.2f}B parameters, {s.layers} layers, hidden {s.hidden}, vocab {s.vocab}",
        f"devices  vLLM GPUs {lay.vllm.gpus} (tensor parallel {len(lay.vllm.gpus)}); trainer GPUs {lay.trainer.gpus} "
        f"(FSDP2, {plan.shards} shards of {s.params / plan.shards / 1e9:.2f}B parameters)",
        f"harnesses {c.harness} (weights {c.mix_weights or 'equal'}), suite {c.suite}; "
        f"attention {(c.model_init_kwargs or {}).get('attn_implementation', 'tree_sdpa')}, bf16 {bool(c.bf16)}, "
        f"importance sampling {c.vllm_importance_sampling_mode} (cap {c.vllm_importance_sampling_clip_max}), "
        f"async {bool(c.async_rollouts)} (staleness <= {c.max_staleness}), weight sync {c.weight_sync}",
        "batch and tokens (estimates from layout.yaml's budget):",
        *(f"  {k:<36} {val:>12,.0f}" for k, val in plan.budget.items()),
        f"trainer GPU memory (GiB, estimate; {lay.gpu_memory_gib:.0f} per GPU):",
        *(f"  {k:<36} {val:>12.1f}" for k, val in plan.trainer_gib.items()),
        f"  {'total':<36} {sum(plan.trainer_gib.values()):>12.1f}",
        f"vLLM GPU memory (GiB, estimate; utilization {lay.vllm.gpu_memory_utilization}):",
        f"  {'bf16 weights':<36} {v['bf16 weights']:>12.1f}",
        f"  {'KV cache':<36} {v['KV cache']:>12.1f}  ({v['KV tokens']:,.0f} tokens, "
        f"{v['full contexts']:.0f} full {lay.vllm.max_model_len}-token contexts)",
        "commands:",
        f"  CUDA_VISIBLE_DEVICES={','.join(map(str, lay.vllm.gpus))} launch_vllm_server({model}, port {lay.vllm.port}, "
        f"{shlex.join(plan.vllm_args())})",
        f"  CUDA_VISIBLE_DEVICES={','.join(map(str, lay.trainer.gpus))} {shlex.join(plan.trainer_command(model))}",
        *(f"warning: {w}" for w in plan.warnings),
    ]
    return "\n".join(lines)
