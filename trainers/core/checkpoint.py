"""Tree-trainer checkpoints: accelerate's state plus what is the trainer's own.

``<ckpt>/accelerate/`` is ``Accelerator.save_state`` (model, optimizer, the registered scheduler,
every rank's RNG); ``<ckpt>/model/`` the policy as a Hugging Face folder; ``trainer.pt`` the
sampler's RNG and subclass state (PPO's value model); ``trainer_state.json`` step, policy
version, log history and the process count. A sharded policy (``--fsdp``) keeps its model and
optimizer state in ``<ckpt>/sharded/`` instead, each rank writing its own shards
(``torch.distributed.checkpoint``), and ``model/`` holds the gathered (LoRA: merged) weights.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from clawgym_env.errors import ConfigError

if TYPE_CHECKING:
    from trainers.core.engine import TreeTrainerBase

__all__ = ["load_checkpoint", "save_checkpoint"]


def save_checkpoint(trainer: TreeTrainerBase, ckpt: Path) -> Path:
    """Write ``ckpt``: accelerate's state (model, optimizer, scheduler, every rank's RNG),
    the model + tokenizer as a Hugging Face folder, the sampler's RNG and subclass state, step/version/history.

    Written into ``<name>.tmp`` and renamed, so a kill leaves either no checkpoint or a whole one.
    """
    acc = trainer.accelerator
    tmp = ckpt.with_name(ckpt.name + ".tmp")
    if acc.is_main_process and tmp.exists():
        shutil.rmtree(tmp)
    acc.wait_for_everyone()
    acc.save_state(str(tmp / "accelerate"), safe_serialization=False)
    if trainer.sharded:
        from trainers.core.fsdp import save_sharded

        save_sharded(trainer.model, trainer.optimizer, tmp / "sharded")
    if acc.is_main_process:
        if trainer.sharded:
            trainer.policy_weights().save_pretrained(tmp / "model")  # gathered at the last sync
        else:
            trainer.policy.save_pretrained(tmp / "model")
            trainer.tokenizer.save_pretrained(tmp / "model")
        torch.save({"sampler_rng": trainer.rng.getstate(), "extra": trainer.extra_state()}, tmp / "trainer.pt")
        (tmp / "trainer_state.json").write_text(
            json.dumps(
                {
                    "step": trainer.step,
                    "policy_version": trainer.policy_version,
                    "log_history": trainer.history,
                    "num_processes": acc.num_processes,
                },
                indent=1,
            )
        )
        if ckpt.exists():
            shutil.rmtree(ckpt)
        tmp.rename(ckpt)
    acc.wait_for_everyone()
    return ckpt


def load_checkpoint(trainer: TreeTrainerBase, ckpt: Path) -> None:
    """Restore what ``save_checkpoint`` wrote into ``trainer`` (built with the same config)."""
    if not (ckpt / "trainer_state.json").is_file() or not (ckpt / "accelerate").is_dir():
        raise ConfigError(f"{ckpt}: not a tree-trainer checkpoint (no trainer_state.json / accelerate/); pass a checkpoint-<step> folder")
    meta = json.loads((ckpt / "trainer_state.json").read_text())
    saved_procs = int(meta.get("num_processes", 1))
    if saved_procs != trainer.accelerator.num_processes:
        raise ConfigError(
            f"{ckpt}: saved by {saved_procs} process(es), resumed with {trainer.accelerator.num_processes}; "
            f"relaunch with `accelerate launch --num_processes {saved_procs}` (each rank's RNG is in it)"
        )
    if (ckpt / "sharded").is_dir() and not trainer.sharded:
        raise ConfigError(f"{ckpt}: saved with --fsdp (sharded model and optimizer); resume it with --fsdp")
    trainer.accelerator.load_state(str(ckpt / "accelerate"))
    if trainer.sharded:
        from trainers.core.fsdp import load_sharded

        load_sharded(trainer.model, trainer.optimizer, ckpt / "sharded")
    state = torch.load(ckpt / "trainer.pt", weights_only=False)  # our own file
    trainer.rng.setstate(state["sampler_rng"])
    trainer.load_extra_state(state.get("extra", {}))
    trainer.step, trainer.policy_version, trainer.history = int(meta["step"]), int(meta["policy_version"]), list(meta["log_history"])
