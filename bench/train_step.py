"""Trainer step time and peak memory: tree GRPO (one packed forward per group tree) against the
same batch in the naive per-call layout (one row per model call, what a black-box GRPO path does).

Both variants run the same loss (clipped surrogate, truncated IS, ``loss_type`` normalisation) on
the same (token, rollout) pairs, then one AdamW step; the printed loss difference shows they agree.
Episodes are SYNTHETIC (``clawgym_env.tree.synthetic``: Claude-Code-shaped prompts that extend
call after call, or OpenClaw-shaped ones that never do); logprobs are random, so IS weights are
capped: this measures cost, not learning. Each variant runs in its own process so its peak RSS
is its own (CPU); on a GPU, ``torch.cuda.max_memory_allocated``.

Measured on the shared 2-core CPU box (other jobs running; two runs each, times as "run1 / run2"):
  tiny, 4 rollouts x 8 calls, 2000-token system prompt, median of 3 steps:
    claude-code  tokens tree 7,302 vs per-call 87,674 (12.0x)  step tree 1.16/1.23 s vs per-call 12.76/3.83 s
                 peak RSS tree +614/+628 MB vs per-call +152/+163 MB
    openclaw     tokens tree 11,416 vs per-call 91,968 (8.1x)  step tree 7.99/2.81 s vs per-call 25.45/3.86 s
                 peak RSS tree +1,353/+1,347 MB vs per-call +144/+171 MB
  small (384 hidden, 4 layers), 4 x 6 calls, 1000-token system prompt:
    claude-code  tokens 4,792 vs 37,436 (7.8x)  step 5.18/7.49 s vs 17.47/16.71 s  peak +1,305/+1,274 MB vs +547/+559 MB
    openclaw     tokens 8,231 vs 40,490 (4.9x)  step 13.17/13.90 s vs 17.88/20.27 s  peak +2,704/+2,473 MB vs +586/+597 MB
  Losses agree to every printed digit. On CPU the tree pays for its dense N x N mask (sdpa/eager):
  its peak is higher than per-call rows run one at a time (the lowest-memory per-call schedule),
  and attention (quadratic in the pack) eats much of the 5-12x token saving for these small widths.
  FlexAttention's block mask on a GPU avoids the dense mask; not measured here (no GPU in this session).

    python bench/train_step.py                          # tiny model, CPU
    python bench/train_step.py --model realistic --rollouts 8 --calls 21 --system 12000   # GPU, random init
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SIZES = {  # Qwen3-architecture shapes, random init
    "tiny": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32},
    "small": {"hidden_size": 384, "intermediate_size": 1152, "num_hidden_layers": 4, "num_attention_heads": 6,
              "num_key_value_heads": 2, "head_dim": 64},
    "realistic": {"hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16,
                      "num_key_value_heads": 8, "head_dim": 128},  # Qwen3-0.6B's shape
}


def model_folder(size: str, out: Path) -> Path:
    """A random-init model of ``size`` with the tiny model's tokenizer, saved as a HF folder."""
    import torch
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

    from clawgym_env.models import tiny_model_path

    tok = AutoTokenizer.from_pretrained(tiny_model_path())
    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=len(tok), max_position_embeddings=131_072, tie_word_embeddings=True, **SIZES[size])
    Qwen3ForCausalLM(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def make_batch(style: str, rollouts: int, calls: int, system: int) -> Any:
    from clawgym_env.tree.synthetic import EpisodeShape, synthetic_group
    from trainers.rollout import RolloutBatch, make_group, tree_filters

    shape = EpisodeShape(n_calls=calls, system_tokens=system)
    group = synthetic_group(style, rollouts, shape)  # type: ignore[arg-type]
    rng = random.Random(0)
    eps = []
    from clawgym_env.episode import EpisodeResult

    for ep in group:
        eps.append(EpisodeResult(session_id=ep[0].session_id, task_id="bench/t", harness=style, status="completed",
                                 score=rng.random(), calls=ep))
    g = make_group("bench/t", style, eps, filters=tree_filters(drop_retries=False, max_leaves=None, exclude_subagents=False))
    return RolloutBatch(groups=[g])


def naive_step(trainer: Any, batch: Any) -> float:
    """The same loss over one row per call (micro-batch of one row), then one AdamW step."""
    import torch

    from clawgym_env.tree import pack_naive
    from trainers.core.losses import (
        clipped_policy_loss,
        pair_weights,
        truncated_is_weights,
    )
    from trainers.tree_grpo.trainer import rollout_advantages

    c = trainer.config
    adv = rollout_advantages(batch, str(c.scale_rewards))
    trees = [(gi, g.tree) for gi, g in enumerate(batch.groups)]
    rollouts = [(gi, ep) for gi, t in trees for ep in t.episodes]
    index = {k: i for i, k in enumerate(rollouts)}
    naive = [(gi, t, pack_naive(t)) for gi, t in trees]
    counts = torch.zeros(len(rollouts), dtype=torch.long)
    for gi, t, nb in naive:
        for i, m in enumerate(nb.loss_masks):
            counts[index[(gi, t.episodes[nb.rollout_index[i]])]] += int(m.sum())
    trainer.optimizer.zero_grad(set_to_none=True)
    total = 0.0
    for gi, t, nb in naive:
        for i, row in enumerate(nb.rows):
            mask = nb.loss_masks[i][nb.prompt_lens[i]:]
            if not mask.any():
                continue
            out = trainer.model(input_ids=row[None].to(trainer.device))
            lp = nb.row_logprobs(i, out.logits.float())[mask.to(trainer.device)]
            roll = nb.rollout_logprobs[i][nb.prompt_lens[i]:][mask].to(lp.device)
            r = index[(gi, t.episodes[nb.rollout_index[i]])]
            a = torch.full_like(lp, adv[rollouts[r]])
            loss_pairs, _ = clipped_policy_loss(lp, lp.detach(), a, epsilon_low=c.epsilon, epsilon_high=c.epsilon_high,
                                                is_weights=truncated_is_weights(lp.detach(), roll, c.is_cap))
            w = pair_weights(c.loss_type, torch.full((len(lp),), r, dtype=torch.long), tokens_per_rollout=counts,
                             num_rollouts=int((counts > 0).sum()), max_completion_length=c.max_completion_length)
            loss = (loss_pairs * w.to(lp.device)).sum()
            loss.backward()
            total += float(loss.detach())
    torch.nn.utils.clip_grad_norm_(trainer.model.parameters(), c.max_grad_norm)
    trainer.optimizer.step()
    return total


def run_variant(a: argparse.Namespace) -> dict[str, Any]:
    import torch

    from trainers.tree_grpo.config import TreeGRPOConfig
    from trainers.tree_grpo.trainer import TreeGRPOTrainer

    with tempfile.TemporaryDirectory() as d:
        folder = model_folder(a.model, Path(d) / "model")
        cfg = TreeGRPOConfig(output_dir=d, suite="bench", loss_type="grpo", learning_rate=1e-6, bf16=a.bf16 or None,
                             max_steps=1000, lr_scheduler_type="constant")
        trainer = TreeGRPOTrainer(cfg, folder)
        batch = make_batch(a.style, a.rollouts, a.calls, a.system)
        tree = batch.groups[0].tree
        cuda = trainer.device == "cuda"

        def step() -> float:
            if a.only == "tree":
                return float(trainer.train_step(batch)["loss"])
            return naive_step(trainer, batch)

        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        loss = step()  # warm-up, and the peak
        peak = torch.cuda.max_memory_allocated() / 2**20 if cuda else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - base
        times = []
        for _ in range(a.repeats):
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            step()
            if cuda:
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        tokens = tree.num_tokens if a.only == "tree" else tree.naive_tokens
        return {"variant": a.only, "step_s": statistics.median(times), "peak_mb": peak, "tokens": tokens, "loss0": loss,
                "device": trainer.device, "trainable": tree.num_trainable}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(SIZES), default="tiny")
    ap.add_argument("--style", choices=["claude-code", "openclaw"], default=None, help="default: both")
    ap.add_argument("--rollouts", type=int, default=4)
    ap.add_argument("--calls", type=int, default=8)
    ap.add_argument("--system", type=int, default=2000, help="system prompt tokens")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--only", choices=["tree", "naive"], default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.only:
        print("RESULT " + json.dumps(run_variant(a)), flush=True)
        return
    print(f"model {a.model} (random init), {a.rollouts} rollouts x {a.calls} calls, system prompt {a.system} tokens, "
          f"median of {a.repeats} steps after a warm-up; peak = RSS growth (CPU) or max allocated (GPU)")
    for style in [a.style] if a.style else ["claude-code", "openclaw"]:
        res = {}
        for variant in ("tree", "naive"):
            cmd = [sys.executable, __file__, "--only", variant, "--style", style, "--model", a.model, "--rollouts",
                   str(a.rollouts), "--calls", str(a.calls), "--system", str(a.system), "--repeats", str(a.repeats)]
            if a.bf16:
                cmd.append("--bf16")
            out = subprocess.run(cmd, capture_output=True, text=True, check=False)
            line = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")]
            if not line:
                print(f"{style} {variant}: failed\n{out.stderr[-2000:]}")
                break
            res[variant] = json.loads(line[0][7:])
        if len(res) < 2:
            continue
        t, n = res["tree"], res["naive"]
        print(f"{style:12s} [{t['device']}] tokens tree {t['tokens']:7d} per-call {n['tokens']:7d} ({n['tokens'] / t['tokens']:4.1f}x) | "
              f"step tree {t['step_s']:7.2f} s per-call {n['step_s']:7.2f} s ({n['step_s'] / t['step_s']:4.1f}x) | "
              f"peak tree {t['peak_mb']:8.0f} MB per-call {n['peak_mb']:8.0f} MB | loss tree {t['loss0']:+.6f} "
              f"per-call {n['loss0']:+.6f}")


if __name__ == "__main__":
    main()
