"""What the training modes cost on CPU: full vs LoRA step, weight sync per protocol (prints, never asserts).

On a fixed SYNTHETIC batch (3 groups x 3 episodes, no sandboxes), for the tiny model and the
embedded SmolLM2-135M: one GRPO step with every weight trained and with ``--use_peft`` (r=16),
trainable parameters, and the time to hand the weights to the rollout side: an in-process copy
(``InProcessCopy``), the LoRA merge it needs first, and the folder a server reload reads
(``ServerReload``'s ``save_pretrained``).

    python bench/train_modes.py                 # ~1-3 min on 2 shared cores
    python bench/train_modes.py --models tiny
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def measure(model: str, peft: bool) -> dict[str, float]:
    from clawgym_env.models import default_model_path, tiny_model_path
    from clawgym_env.proxy.backends.hf import HFBackend
    from tests.trainers.ddp_step import SUITE, batch
    from trainers.tree_grpo.config import TreeGRPOConfig
    from trainers.tree_grpo.trainer import TreeGRPOTrainer

    path = tiny_model_path() if model == "tiny" else default_model_path()
    with tempfile.TemporaryDirectory() as out:
        cfg = TreeGRPOConfig(
            output_dir=out,
            suite=str(SUITE),
            harness="custom",
            max_steps=4,
            save_steps=0,
            seed=0,
            learning_rate=1e-4,
            max_completion_length=16,
            use_peft=peft,
            lora_r=16,
            lora_alpha=32,
        )
        trainer = TreeGRPOTrainer(cfg, path)
        trainer.train_step(batch(0))  # warm-up: first-call costs (attention registration, allocator)
        b = batch(1)
        t0 = time.perf_counter()
        m = trainer.train_step(b)
        step = time.perf_counter() - t0
        weights = trainer.policy_weights()
        t0 = time.perf_counter()
        state = weights.state_dict()
        merge = time.perf_counter() - t0
        backend = HFBackend(path)
        t0 = time.perf_counter()
        backend.update_weights(state, 1)
        copy = time.perf_counter() - t0
        t0 = time.perf_counter()
        weights.save_pretrained(Path(out) / "policy-latest")
        save = time.perf_counter() - t0
        trainable = sum(p.numel() for p in trainer.policy.parameters() if p.requires_grad)
        total = sum(p.numel() for p in trainer.policy.parameters())
    return {
        "step_s": step,
        "tokens": m["trainable_tokens"],
        "trainable": trainable,
        "total": total,
        "state_s": merge,
        "copy_s": copy,
        "save_s": save,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="tiny,smollm2")
    a = p.parse_args()
    print(f"{'model':8s} {'mode':5s} {'trainable params':>22s} {'step s':>7s} {'state s':>8s} {'copy s':>7s} {'save s':>7s}")
    for model in a.models.split(","):
        for peft in (False, True):
            r = measure(model, peft)
            share = r["trainable"] / r["total"]
            print(
                f"{model:8s} {'lora' if peft else 'full':5s} {r['trainable']:>12,d} ({share:6.1%}) {r['step_s']:7.2f} "
                f"{r['state_s']:8.3f} {r['copy_s']:7.3f} {r['save_s']:7.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
