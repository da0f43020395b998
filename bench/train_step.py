"""Trainer step memory and correctness: peak memory of one tree fwd+bwd at 8K/16K/32K tokens with the
former path (dense N x N tree mask + full [N, vocab] logits) against the current one (block-sparse
``tree_sdpa`` attention + chunked logprobs at loss tokens), and the tree gradient against the
per-call layout's.

``--mode memory``: each (path, size) runs in its own process, one ``train_step`` (forward, backward,
AdamW) on a SYNTHETIC Claude-Code-shaped group of 4 rollouts grown to the target tree size; peak =
growth of the process's peak RSS over the step (``/proc/self/clear_refs`` resets it), or
``torch.cuda.max_memory_allocated`` on a GPU. The former path runs under an address-space limit
(``--old-limit-gb``) so it cannot take the shared machine down; past it, it prints "> limit".

``--mode grads``: one group (4 rollouts x 8 calls, 2000-token system prompt); the rollout logprobs
are set to the model's own plus N(0, 0.02) noise, so the truncated IS weights are ~1 and none is
capped (random logprobs would cap them all and hide a wrong weight); the GRPO gradient of the tree
layout (one packed forward, the trainer's code) is compared with the per-call layout's (one row per
call, plain causal SDPA, full log_softmax, an independent re-statement of the loss).

    python bench/train_step.py                       # both modes, tiny model (64 wide), CPU
    python bench/train_step.py --mode memory --sizes 8192,16384,32768 --vocab 151936

Figures (shared 2-core CPU box, other jobs running) are in trainers/README.md.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SIZES = {  # Qwen3-architecture shapes, random init
    "tiny": {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 32,
    },
    "small": {
        "hidden_size": 384,
        "intermediate_size": 1152,
        "num_hidden_layers": 4,
        "num_attention_heads": 6,
        "num_key_value_heads": 2,
        "head_dim": 64,
    },
    "realistic": {
        "hidden_size": 1024,
        "intermediate_size": 3072,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
    },  # Qwen3-0.6B's shape
}
PATHS = {  # what the trainer is configured with for each path
    "old": {"model_init_kwargs": {"attn_implementation": "sdpa"}, "logprob_chunk_size": 0},
    "new": {},  # the defaults: tree_sdpa, logprob_chunk_size=1024
}


def model_folder(size: str, out: Path, vocab: int | None = None) -> Path:
    """A random-init model of ``size`` with the tiny model's tokenizer, saved as a HF folder."""
    import torch
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

    from clawgym_env.models import tiny_model_path

    tok = AutoTokenizer.from_pretrained(tiny_model_path())
    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=vocab or len(tok), max_position_embeddings=131_072, tie_word_embeddings=True, **SIZES[size])
    Qwen3ForCausalLM(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def make_batch(tokens: int | None = None, calls: int = 8, system: int = 2000, rollouts: int = 4) -> Any:
    """One SYNTHETIC claude-code group; with ``tokens``, calls are added until the tree has that many."""
    from clawgym_env.episode import EpisodeResult
    from clawgym_env.tree import build_forest
    from clawgym_env.tree.synthetic import EpisodeShape, synthetic_group
    from trainers.rollout import RolloutBatch, make_group, tree_filters

    if tokens is not None:
        calls = 2
        while build_forest(synthetic_group("claude-code", rollouts, EpisodeShape(n_calls=calls, system_tokens=system))).num_tokens < tokens:
            calls += 2
    group = synthetic_group("claude-code", rollouts, EpisodeShape(n_calls=calls, system_tokens=system))
    rng = random.Random(0)
    eps = [
        EpisodeResult(
            session_id=ep[0].session_id, task_id="bench/t", harness="claude-code", status="completed", score=rng.random(), calls=ep
        )
        for ep in group
    ]
    g = make_group("bench/t", "claude-code", eps, filters=tree_filters(drop_retries=False, max_leaves=None, exclude_subagents=False))
    return RolloutBatch(groups=[g])


def trainer_for(folder: Path, out: str, path: str, **kw: Any) -> Any:
    from trainers.tree_grpo.config import TreeGRPOConfig
    from trainers.tree_grpo.trainer import TreeGRPOTrainer

    cfg = TreeGRPOConfig(
        output_dir=out,
        suite="bench",
        loss_type="grpo",
        max_steps=1000,
        lr_scheduler_type="constant",
        **{"learning_rate": 1e-6, **PATHS[path], **kw},
    )
    return TreeGRPOTrainer(cfg, folder)


# -- memory ------------------------------------------------------------------------------------------


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def memory_child(a: argparse.Namespace) -> dict[str, Any]:
    """One train_step of ``a.path`` at ``a.tokens`` tokens; returns peak growth (MB) and time."""
    import torch

    with tempfile.TemporaryDirectory() as d:
        trainer = trainer_for(model_folder(a.model, Path(d) / "model", a.vocab), d, a.path)
        batch = make_batch(tokens=a.tokens)
        tree = batch.groups[0].tree
        cuda = trainer.device == "cuda"
        if a.path == "old" and a.limit_gb and not cuda:
            room = (_status_kb("VmSize") + int(a.limit_gb * 2**20)) * 1024
            resource.setrlimit(resource.RLIMIT_AS, (room, room))
        if cuda:
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
        else:
            Path("/proc/self/clear_refs").write_text("5")  # reset the peak RSS (VmHWM) to the current RSS
            base = _status_kb("VmRSS") * 1024
        t0 = time.perf_counter()
        try:
            trainer.train_step(batch)
        except (MemoryError, RuntimeError) as exc:
            if "memory" not in str(exc).lower() and not isinstance(exc, MemoryError):
                raise
            return {"tokens": tree.num_tokens, "over_limit": True, "limit_gb": a.limit_gb, "device": str(trainer.device)}
        secs = time.perf_counter() - t0
        peak = (torch.cuda.max_memory_allocated() if cuda else _status_kb("VmHWM") * 1024) - base
        return {
            "tokens": tree.num_tokens,
            "trainable": tree.num_trainable,
            "peak_mb": peak / 2**20,
            "step_s": secs,
            "device": str(trainer.device),
            "over_limit": False,
        }


def memory_table(a: argparse.Namespace) -> None:
    sizes = [int(s) for s in a.sizes.split(",")]
    vocab = f", vocab {a.vocab}" if a.vocab else ""
    print(
        f"peak memory of one train_step (fwd+bwd+AdamW), model {a.model}{vocab}, SYNTHETIC claude-code group of 4 rollouts; "
        "old = dense mask + full logits, new = tree_sdpa + chunked logprobs"
    )
    print(f"{'target':>7} {'tokens':>7} {'trainable':>9} | {'old peak':>10} {'old step':>9} | {'new peak':>10} {'new step':>9}")
    for size in sizes:
        row: dict[str, dict[str, Any]] = {}
        for path in ("old", "new"):
            cmd = [
                sys.executable,
                __file__,
                "--child",
                "memory",
                "--path",
                path,
                "--tokens",
                str(size),
                "--model",
                a.model,
                "--old-limit-gb",
                str(a.old_limit_gb),
            ] + (["--vocab", str(a.vocab)] if a.vocab else [])
            out = subprocess.run(cmd, capture_output=True, text=True, check=False)
            line = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")]
            row[path] = json.loads(line[0][7:]) if line else {"failed": out.stderr[-300:].strip().splitlines()[-1:] or ["?"]}
        cells = []
        for path in ("old", "new"):
            r = row[path]
            if "failed" in r:
                cells.append(f"{'failed':>10} {'':>9}")
            elif r["over_limit"]:
                cells.append(f"{'> ' + str(r['limit_gb']) + ' GB':>10} {'':>9}")
            else:
                cells.append(f"{r['peak_mb']:>7.0f} MB {r['step_s']:>7.1f} s")
        ref = next((r for r in row.values() if "tokens" in r), {})
        print(f"{size:>7} {ref.get('tokens', 0):>7} {ref.get('trainable', 0):>9} | {cells[0]} | {cells[1]}", flush=True)
        for path, r in row.items():
            if "failed" in r:
                print(f"  {path} failed: {r['failed'][0]}")


# -- gradients: tree layout (the trainer) vs per-call layout (one row per call) -----------------------


def set_rollout_logprobs(trainer: Any, tree: Any, noise: float, seed: int = 0) -> None:
    """Rollout logprobs = the model's own + N(0, noise): what a sampler close to the trainer records."""
    import torch

    from clawgym_env.tree import pack_tree

    with torch.no_grad():
        lp = trainer.forward_logprobs(trainer.model, pack_tree(tree))
    g = torch.Generator().manual_seed(seed)
    i = 0
    for node in tree.nodes():  # one pack of the whole tree lays nodes out in this order
        for off in range(len(node)):
            if node.sampled[off]:
                node.logprobs[off] = float(lp[i + off]) + noise * float(torch.randn((), generator=g))
        i += len(node)


def per_call_grads(trainer: Any, model: Any, batch: Any) -> tuple[float, dict[str, Any], dict[str, float]]:
    """The GRPO loss over one row per call (plain causal attention, full log_softmax) and its gradient."""
    import torch

    from clawgym_env.tree import pack_naive
    from trainers.core.losses import clipped_policy_loss, importance_weights, pair_weights
    from trainers.tree_grpo.trainer import rollout_advantages

    c = trainer.config
    adv = rollout_advantages(batch, str(c.scale_rewards))
    tree = batch.groups[0].tree
    nb = pack_naive(tree)
    counts = torch.zeros(len(tree.episodes), dtype=torch.long)
    for i, m in enumerate(nb.loss_masks):
        counts[nb.rollout_index[i]] += int(m.sum())
    model.zero_grad(set_to_none=True)
    total, weights, capped, pairs = 0.0, 0.0, 0.0, 0
    for i, row in enumerate(nb.rows):
        mask = nb.loss_masks[i][nb.prompt_lens[i] :]
        if not mask.any():
            continue
        lp = nb.row_logprobs(i, model(input_ids=row[None]).logits.float())[mask]
        roll = nb.rollout_logprobs[i][nb.prompt_lens[i] :][mask]
        r = nb.rollout_index[i]
        cap = c.vllm_importance_sampling_clip_max
        w = importance_weights(lp.detach(), roll, mode="token_truncate", clip_min=c.vllm_importance_sampling_clip_min, clip_max=cap)
        loss_pairs, _ = clipped_policy_loss(
            lp,
            lp.detach(),
            torch.full_like(lp, adv[(0, tree.episodes[r])]),
            epsilon_low=c.epsilon,
            epsilon_high=c.epsilon_high,
            is_weights=w,
        )
        pw = pair_weights(
            c.loss_type,
            torch.full((len(lp),), r, dtype=torch.long),
            tokens_per_rollout=counts,
            max_completion_length=int(c.max_completion_length or 1),
        )
        loss = (loss_pairs * pw).sum()
        loss.backward()
        total += float(loss.detach())
        weights += float(w.sum())
        capped += float((w >= cap).sum())
        pairs += len(lp)
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return total, grads, {"is_weight_mean": weights / pairs, "is_capped_share": capped / pairs, "pairs": pairs}


def grads_report(a: argparse.Namespace) -> None:
    import copy

    import torch

    with tempfile.TemporaryDirectory() as d:
        folder = model_folder(a.model, Path(d) / "model", a.vocab)
        batch = make_batch(calls=a.calls, system=a.system)
        tree = batch.groups[0].tree
        for path in ("new", "old"):
            trainer = trainer_for(folder, d, path, learning_rate=0.0, max_grad_norm=1e12)  # lr 0: the grads stay, weights do not move
            per_call_model = copy.deepcopy(trainer.model)
            per_call_model.config._attn_implementation = "sdpa"  # one causal row per call: no tree mask
            set_rollout_logprobs(trainer, tree, a.noise)
            g_tree: dict[str, Any] = {}
            step = trainer.optimizer.step

            def snapshot(*args: Any, **kw: Any) -> Any:  # the engine clears the grads right after the step
                g_tree.update({n: p.grad.detach().clone() for n, p in trainer.model.named_parameters() if p.grad is not None})
                return step(*args, **kw)

            trainer.optimizer.step = snapshot
            t0 = time.perf_counter()
            metrics = trainer.train_step(copy.deepcopy(batch))
            t_tree = time.perf_counter() - t0
            t0 = time.perf_counter()
            loss_pc, g_pc, stats = per_call_grads(trainer, per_call_model, batch)
            t_pc = time.perf_counter() - t0
            assert set(g_tree) == set(g_pc), "tree and per-call layouts reached different parameters"
            a_vec = torch.cat([g_tree[n].flatten() for n in sorted(g_tree)]).double()
            b_vec = torch.cat([g_pc[n].flatten() for n in sorted(g_pc)]).double()
            rel = float((a_vec - b_vec).norm() / b_vec.norm())
            cos = float(torch.nn.functional.cosine_similarity(a_vec, b_vec, dim=0))
            print(
                f"[{path}] tokens tree {tree.num_tokens} per-call {tree.naive_tokens} ({len(nb_rows(tree))} rows), "
                f"{stats['pairs']} (token, rollout) pairs | loss tree {metrics['loss']:+.9f} per-call {loss_pc:+.9f} | "
                f"grad |tree - per-call| / |per-call| {rel:.2e}, max abs diff {float((a_vec - b_vec).abs().max()):.2e}, "
                f"|grad| {float(b_vec.norm()):.3e}, cosine {cos:.9f} | IS weight mean {stats['is_weight_mean']:.4f} "
                f"(trainer {metrics['is_weight/mean']:.4f}), capped {stats['is_capped_share']:.1%} | mismatch "
                f"{metrics['mismatch']:.2e} | time tree {t_tree:.1f} s per-call {t_pc:.1f} s",
                flush=True,
            )


def nb_rows(tree: Any) -> list[Any]:
    from clawgym_env.tree import pack_naive

    return pack_naive(tree).rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=["memory", "grads", "both"], default="both")
    ap.add_argument("--model", choices=sorted(SIZES), default="tiny")
    ap.add_argument("--vocab", type=int, default=None, help="output vocabulary of the random model (default: the tiny tokenizer's)")
    ap.add_argument("--sizes", default="8192,16384,32768", help="tree tokens for --mode memory")
    ap.add_argument("--old-limit-gb", type=float, default=10.0, help="address-space growth allowed to the former path")
    ap.add_argument("--calls", type=int, default=8, help="calls per rollout for --mode grads")
    ap.add_argument("--system", type=int, default=2000, help="system prompt tokens for --mode grads")
    ap.add_argument("--noise", type=float, default=0.02, help="std of rollout logprob noise around the model's, --mode grads")
    ap.add_argument("--child", choices=["memory"], help=argparse.SUPPRESS)
    ap.add_argument("--path", choices=sorted(PATHS), help=argparse.SUPPRESS)
    ap.add_argument("--tokens", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child == "memory":
        a.limit_gb = a.old_limit_gb
        print("RESULT " + json.dumps(memory_child(a)), flush=True)
        return
    if a.mode in ("memory", "both"):
        memory_table(a)
    if a.mode in ("grads", "both"):
        grads_report(a)


if __name__ == "__main__":
    main()
