"""GPU benchmark (one prepared script): tree layout with a FlexAttention BlockMask vs per-call rows.

    python bench/gpu_tree.py                      # CUDA: random-init Qwen3-0.6B shape, bf16, < 5 min
    python bench/gpu_tree.py --dry-run            # CPU: tiny shape, same code path, for a smoke check
    python bench/gpu_tree.py --out result.json    # also write the figures as JSON

Episodes are SYNTHETIC (21 main-line calls shaped like Claude Code and OpenClaw, 12k-token system
prompt) unless --captures is given. For each: one fwd+bwd over the packed tree (``tree_flex``:
compiled flex_attention over the tree BlockMask, the trainer's attention) against one fwd+bwd per
call (sdpa, causal), with the LM head applied only to the positions that predict completion tokens
in both layouts. Reports tokens, median step time, peak memory, and the max |logprob difference|
between layouts (bf16) as a sanity check. The dry run takes the same path on CPU (there flex's
backward is ``tree_flex``'s BlockMask backward; bench/flex_cpu.py times it against tree_sdpa).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clawgym_env.tree import (  # noqa: E402  (after the sys.path line above)
    NaiveBatch,
    PackedTree,
    build_tree,
    load_calls,
    pack_naive,
    pack_tree,
    register_tree_flex,
)
from clawgym_env.tree.synthetic import EpisodeShape, synthetic_episode  # noqa: E402

QWEN3_06B = {
    "vocab_size": 151_936,
    "hidden_size": 1024,
    "intermediate_size": 3072,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "rope_theta": 1_000_000.0,
    "tie_word_embeddings": True,
    "max_position_embeddings": 40_960,
}
TINY = {
    "vocab_size": 512,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 32,
    "max_position_embeddings": 40_960,
}


def build_model(shape: dict, device: str, dtype: torch.dtype) -> torch.nn.Module:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen3Config(**shape, attn_implementation="sdpa")
    with torch.device(device):
        model = Qwen3ForCausalLM(cfg)
    return model.to(dtype).train()


def _selected_logprobs(model: torch.nn.Module, hidden: torch.Tensor, rows: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    logits = model.lm_head(hidden[rows]).float()
    return torch.log_softmax(logits, -1).gather(-1, targets[:, None])[:, 0]


def tree_logprobs(model: torch.nn.Module, pk: PackedTree, mask, device: str) -> torch.Tensor:
    """Loss-token logprobs from one pass over the pack; a BlockMask selects tree_flex, a dense mask sdpa."""
    model.config._attn_implementation = "sdpa" if isinstance(mask, torch.Tensor) else register_tree_flex()
    try:
        hidden = model.model(
            input_ids=pk.input_ids[None].to(device), position_ids=pk.position_ids[None].to(device), attention_mask=mask
        ).last_hidden_state[0]
    finally:
        model.config._attn_implementation = "sdpa"
    loss = pk.loss_mask.to(device)
    return _selected_logprobs(model, hidden, pk.prev_index.to(device)[loss], pk.input_ids.to(device)[loss])


def row_logprobs(model: torch.nn.Module, naive: NaiveBatch, i: int, device: str) -> torch.Tensor:
    row = naive.rows[i].to(device)
    hidden = model.model(input_ids=row[None]).last_hidden_state[0]
    p = naive.prompt_lens[i]
    return _selected_logprobs(model, hidden, torch.arange(p - 1, row.shape[0] - 1, device=device), row[p:])


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(fn, repeats: int, device: str) -> tuple[float, float]:
    """Median seconds and peak GiB (CUDA) of ``fn`` after one warm-up (which also compiles)."""
    fn()
    _sync(device)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t)
    peak = torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else float("nan")
    return statistics.median(times), peak


def run_episode(model: torch.nn.Module, calls: list, label: str, device: str, repeats: int, block: int) -> dict:
    tree = build_tree(calls)
    pk = pack_tree(tree).padded(block)  # whole blocks: pad tokens see only themselves, outside the loss
    naive = pack_naive(tree)
    t0 = time.perf_counter()
    bm = pk.block_mask(device, block_size=block)
    mask_s = time.perf_counter() - t0

    def tree_step() -> None:
        model.zero_grad(set_to_none=True)
        (-tree_logprobs(model, pk, bm, device).sum()).backward()

    def naive_step() -> None:
        model.zero_grad(set_to_none=True)
        for i in range(len(naive.rows)):
            (-row_logprobs(model, naive, i, device).sum()).backward()

    t_tree, m_tree = timed(tree_step, repeats, device)
    t_naive, m_naive = timed(naive_step, repeats, device)
    with torch.no_grad():  # sanity: flex over the BlockMask gives the per-call logprobs of the first calls
        lp_tree = tree_logprobs(model, pk, bm, device)
        order = {int(ix): n for n, ix in enumerate(torch.nonzero(pk.loss_mask)[:, 0].tolist())}
        diff = 0.0
        for i, ref in enumerate(naive.refs[:3]):
            idx = pk.call_tokens[ref].tolist()
            if all(ix in order for ix in idx) and idx:
                a = lp_tree[[order[ix] for ix in idx]]
                diff = max(diff, float((a - row_logprobs(model, naive, i, device)).abs().max()))
    res = {
        "episode": label,
        "tree_train_attention": "tree_flex+BlockMask",
        "calls": len(tree.calls),
        "tokens_per_call_layout": naive.num_tokens,
        "tokens_tree": tree.num_tokens,
        "tokens_tree_padded": len(pk),
        "token_ratio": naive.num_tokens / tree.num_tokens,
        "block_mask_s": mask_s,
        "block_mask_sparsity_pct": float(bm.sparsity()),
        "step_s_tree": t_tree,
        "step_s_per_call": t_naive,
        "speedup": t_naive / t_tree,
        "peak_gib_tree": m_tree,
        "peak_gib_per_call": m_naive,
        "max_abs_logprob_diff_first_calls": diff,
    }
    print(json.dumps(res), flush=True)
    return res


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dry-run", action="store_true", help="tiny model on CPU, small episodes")
    ap.add_argument("--captures", nargs="*", type=Path, default=[])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--block", type=int, default=128, help="BlockMask block size")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.dry_run:
        device, dtype, shape = "cpu", torch.float32, TINY
        ep_shape = EpisodeShape(n_calls=6, system_tokens=200, vocab_size=TINY["vocab_size"])
        args.repeats = 1
    else:
        if not torch.cuda.is_available():
            raise SystemExit("no CUDA device: run with --dry-run for the CPU smoke path")
        device, dtype, shape = "cuda", torch.bfloat16, QWEN3_06B
        ep_shape = EpisodeShape(vocab_size=QWEN3_06B["vocab_size"])
    print(
        f"device={device} dtype={dtype} torch={torch.__version__} gpu={torch.cuda.get_device_name() if device == 'cuda' else '-'}",
        flush=True,
    )
    model = build_model(shape, device, dtype)
    if args.captures:
        episodes = {f"real {p.stem}": load_calls(p) for p in args.captures}
    else:
        episodes = {f"SYNTHETIC {s}": synthetic_episode(s, shape=ep_shape) for s in ("claude-code", "openclaw")}
    results = [run_episode(model, calls, label, device, args.repeats, args.block) for label, calls in episodes.items()]
    if args.out:
        args.out.write_text(json.dumps({"device": device, "shape": shape, "results": results}, indent=2))


if __name__ == "__main__":
    main()
