"""A recipe folder: ``recipe.yaml`` (the trainer's flags), ``layout.yaml`` (where each part runs), ``config.json``
(the model's architecture, no weights). This module reads and checks ``layout.yaml``."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from clawgym_env.errors import ConfigError

__all__ = ["Budget", "Layout", "TinyRun", "TrainerLayout", "VLLMLayout", "load_layout"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class VLLMLayout(_Strict):
    gpus: list[int] = Field(min_length=1, description="GPUs of the one vLLM server (its tensor-parallel size).")
    port: int = Field(8000, description="The server's port on this node.")
    gpu_memory_utilization: float = Field(0.85, gt=0, le=1, description="Share of each GPU vLLM takes (weights + KV cache).")
    max_model_len: int = Field(gt=0, description="Longest context served (prompt + completion tokens).")


class TrainerLayout(_Strict):
    gpus: list[int] = Field(min_length=1, description="GPUs of the trainer: one process each, the policy sharded over all.")


class Budget(_Strict):
    shared_prompt_tokens: int = Field(gt=0, description="Prompt tokens every episode of a group shares (system prompt, tools).")
    episode_tokens: int = Field(gt=0, description="Tokens an episode adds past the shared prompt.")


class TinyRun(_Strict):
    processes: int = Field(2, ge=2, description="CPU processes the policy is sharded over (gloo).")
    max_steps: int = Field(1, ge=1)
    pairs_per_step: int = Field(2, ge=1)
    num_generations: int = Field(2, ge=2)
    max_completion_length: int = Field(8, ge=1)
    beta: float = Field(
        0.001,
        ge=0,
        description="A KL term, so a group of equal rewards (a random tiny model's usual) "
        "still trains: with beta 0 such a group is not forwarded.",
    )
    suite: str = Field(description="A suite the recipe's harnesses finish quickly with a tiny model.")
    tasks: str | None = None


class Layout(_Strict):
    gpus: int = Field(gt=0, description="GPUs on the node.")
    gpu_memory_gib: float = Field(gt=0, description="Memory of one GPU.")
    vllm: VLLMLayout
    trainer: TrainerLayout
    budget: Budget
    tiny: TinyRun

    @model_validator(mode="after")
    def _devices(self) -> Layout:
        used = [*self.vllm.gpus, *self.trainer.gpus]
        if len(set(used)) != len(used):
            raise ValueError(f"vllm.gpus {self.vllm.gpus} and trainer.gpus {self.trainer.gpus} share a GPU; give each its own")
        if not all(0 <= g < self.gpus for g in used):
            raise ValueError(f"GPU ids {used} must lie in 0..{self.gpus - 1} (gpus: {self.gpus})")
        return self


def load_layout(folder: Path) -> Layout:
    """``<folder>/layout.yaml``, checked; a mistake names the file and the field."""
    path = folder / "layout.yaml"
    if not path.is_file():
        raise ConfigError(f"{folder}: no layout.yaml; a recipe folder holds recipe.yaml, layout.yaml and config.json")
    try:
        return Layout.model_validate(yaml.safe_load(path.read_text()) or {})
    except ValidationError as exc:
        where = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(top)'}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"{path}: {where}") from None
