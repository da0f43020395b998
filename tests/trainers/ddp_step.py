"""Run under ``accelerate launch`` by test_distributed.py: GRPO steps on fixed SYNTHETIC batches.

    ddp_step.py OUT step           one step on batch 0; OUT/result.pt: loss, metrics, parameters
    ddp_step.py OUT two            step on batch 0, checkpoint, step on batch 1; OUT/result.pt
    ddp_step.py OUT resume CKPT    resume CKPT, step on batch 1; OUT/result.pt
    ddp_step.py OUT trunk          one step of a DetachedTrunkForward trainer on a batch with 300-token trunks

Flags after the mode: ``--fsdp`` (shard the policy), ``--lora`` (train a LoRA adapter), ``--bf16``.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import torch

SUITE = Path(__file__).resolve().parents[2] / "trainers" / "suites" / "toy-rl"


def batch(seed: int, system_tokens: int = 40) -> Any:
    """Three groups of 3 SYNTHETIC episodes (3 packs of different sizes, so ranks get unequal shares)."""
    from clawgym_env.episode import EpisodeResult
    from clawgym_env.tree.synthetic import EpisodeShape, synthetic_group
    from trainers.rollout import build_batch, tree_filters

    groups = []
    for g, calls in enumerate((2, 3, 4)):
        shape = EpisodeShape(
            n_calls=calls,
            system_tokens=system_tokens,
            task_tokens=10,
            completion_tokens=(4, 10),
            tool_result_tokens=(4, 10),
            volatile_tokens=4,
            vocab_size=200,
        )
        rng = random.Random(seed * 10 + g)
        eps = [
            EpisodeResult(session_id=ep[0].session_id, task_id="toy/t", harness="custom", status="completed", score=rng.random(), calls=ep)
            for ep in synthetic_group("claude-code", 3, shape, seed=seed * 10 + g)
        ]
        groups.append((type("T", (), {"full_id": f"toy/t{g}"})(), "custom", eps))
    return build_batch(
        groups,
        filters=tree_filters(drop_retries=False, max_leaves=None, exclude_subagents=False),
        policy_version=0,
        skip_zero_variance=False,
    )


def trainer(out: Path, resume: str | None = None, detached: bool = False, flags: tuple[str, ...] = ()) -> Any:
    from clawgym_env.models import tiny_model_path
    from trainers.tree_grpo.config import TreeGRPOConfig
    from trainers.tree_grpo.trainer import TreeGRPOTrainer
    from trainers.tree_sft.forward import DetachedTrunkForward

    class DetachedTrunkGRPO(DetachedTrunkForward, TreeGRPOTrainer):
        pass

    cfg = TreeGRPOConfig(
        output_dir=str(out),
        suite=str(SUITE),
        harness="custom",
        max_steps=4,
        save_steps=0,
        seed=0,
        learning_rate=1e-3,
        beta=0.04,
        max_completion_length=16,
        use_cpu=True,
        fsdp="--fsdp" in flags,
        use_peft="--lora" in flags,
        lora_r=4,
        bf16="--bf16" in flags,
    )
    return (DetachedTrunkGRPO if detached else TreeGRPOTrainer)(cfg, tiny_model_path(), resume_from_checkpoint=resume)


def main() -> None:
    out, mode = Path(sys.argv[1]), sys.argv[2]
    flags = tuple(a for a in sys.argv[3:] if a.startswith("--"))
    from trainers.tree_sft.forward import shared_prefix_len

    t = trainer(out / "run", sys.argv[3] if mode == "resume" else None, detached=mode == "trunk", flags=flags)
    metrics = []
    trunks: list[int] = []
    if mode in ("step", "two", "trunk"):
        b = batch(0, system_tokens=300 if mode == "trunk" else 40)
        trunks = [shared_prefix_len(s.pack) for s in t.slots(b)[0]]
        metrics.append(t.train_step(b))
        t.step = 1
    if mode == "two":
        t.save_checkpoint()
    if mode in ("two", "resume"):
        metrics.append(t.train_step(batch(1)))
    if t.accelerator.is_main_process:  # the policy as rollouts get it (sharded: gathered at the last sync; LoRA: merged)
        params = {k: v.detach().clone() for k, v in t.policy_weights().state_dict().items()}
        trainable = [n for n, p in t.policy.named_parameters() if p.requires_grad]
        torch.save(
            {
                "metrics": metrics,
                "params": params,
                "processes": t.accelerator.num_processes,
                "trainable": trainable,
                "version": t.policy_version,
                "trunks": trunks,
                "sharded": t.sharded,
            },
            out / "result.pt",
        )
    t.close()


if __name__ == "__main__":
    main()
