"""Benchmark: tokens forwarded and CPU fwd+bwd step time, per-call layout vs prefix tree.

    python bench/tree.py                      # captures from tests/golden/*/ if any, else SYNTHETIC episodes
    python bench/tree.py --captures a.jsonl b.jsonl
    python bench/tree.py --time-head 128 --repeats 1   # quicker timing

Token counts are measured at full size, on real captures (tests/golden/, the long episodes with subagents,
compactions and retries among them) and on SYNTHETIC episodes of the same shape, side by side for the
layouts trainers use: one row per call; the peers' layouts, one sample per leaf of the conversation
tree (a message graph whose compactions and subagents are extra leaves) and one sample per chain (each
line of work, as ``tree/classify.py`` tells them, merged while a call extends the previous one, a
new sample where it does not: a restart, a fork); and the prefix tree. Foreign calls are left out,
as training leaves them out. Step times use a random-init tiny Qwen3 (2 layers, hidden 64) on
CPU, on the same episodes with the head every call shares cut to --time-head tokens (tree shape
unchanged) so a dense N x N tree mask fits a small machine; a tree still larger than
--max-time-tokens (an episode whose calls share little of their head, as with a subagent's own
system prompt) is not timed. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clawgym_env.capture.records import CallRecord
from clawgym_env.tree import (
    PrefixTree,
    build_forest,
    build_tree,
    load_calls,
    pack_naive,
    pack_tree,
)
from clawgym_env.tree.synthetic import EpisodeShape, synthetic_episode, synthetic_group
from clawgym_env.tree.transform import compact_vocab, trim_shared_head


def chain_tokens(calls: Sequence[CallRecord]) -> int:
    """Tokens a chain-merging layout forwards: a call that extends the previous path joins its row."""
    total, prev = 0, None
    for c in sorted(calls, key=lambda c: c.call_index):
        path = list(c.prompt_ids or []) + list(c.completion_ids or [])
        if prev is not None and path[: len(prev)] == prev:
            total += len(path) - len(prev)
        else:
            total += len(path)
        prev = path
    return total


def per_chain_tokens(tree: PrefixTree, calls: Sequence[CallRecord]) -> int:
    """One sample per line of work (the classifier's chains, foreign ones left out), merged as ``chain_tokens`` merges."""
    kept = {(r.episode_id, r.call_index): info.chain for r, info in tree.calls.items()}
    chains: dict[str, list[CallRecord]] = {}
    for c in calls:
        chain = kept.get((c.session_id, c.call_index))
        if chain is not None:
            chains.setdefault(chain, []).append(c)
    return sum(chain_tokens(cs) for cs in chains.values())


def per_leaf_tokens(tree: PrefixTree) -> int:
    """One sample per leaf: each root-to-leaf path whole, as a message graph's leaves are trained."""
    return sum(leaf.end_depth for leaf in tree.leaves())


def load_sources(paths: list[Path]) -> dict[str, list[list[CallRecord]]]:
    """Real episodes by label: the given files, else tests/golden/<harness>/capture.jsonl*; may be empty."""
    if not paths:
        paths = sorted((ROOT / "tests" / "golden").glob("*/capture.jsonl*"))  # real captures (H6's golden set)
    out: dict[str, list[list[CallRecord]]] = {}
    for p in paths:
        calls = load_calls(p)
        if calls:
            out.setdefault(f"real {p.parent.name}", []).append(calls)
    return out


def token_report(sources: dict[str, list[list[CallRecord]]]) -> None:
    print("== tokens forwarded: per-call rows, one sample per leaf, one sample per chain, prefix tree ==")
    print(
        "(chain: calls merged in arrival order while each extends the previous; per chain: the same within each line "
        "of work; ratios are to the tree)"
    )
    print(
        f"{'episodes':34s} {'calls':>5s} {'kinds':>24s} {'per-call':>9s} {'per-leaf':>9s} {'chain':>9s} {'per-chain':>9s} "
        f"{'tree':>7s} {'per-call':>8s} {'per-leaf':>8s} {'chain':>6s} {'per-chain':>9s} {'extends prev':>12s}"
    )
    for label, episodes in sources.items():
        for i, calls in enumerate(episodes):
            tree = build_tree(calls)
            packed = pack_tree(tree)
            assert len(packed) == tree.num_tokens  # the tree layout forwards exactly the unique tokens
            chain = chain_tokens(calls)
            ordered = sorted(calls, key=lambda c: c.call_index)
            extends = sum(
                1
                for a, b in itertools.pairwise(ordered)
                if (b.prompt_ids or [])[: len(a.prompt_ids or []) + len(a.completion_ids or [])]
                == list(a.prompt_ids or []) + list(a.completion_ids or [])
            )
            leaf, per_chain, n = per_leaf_tokens(tree), per_chain_tokens(tree, calls), tree.num_tokens
            kinds = ",".join(f"{k[0]}{v}" for kinds in tree.kind_counts.values() for k, v in sorted(kinds.items()))
            print(
                f"{label + f' #{i}':34s} {len(calls):5d} {kinds:>24s} {tree.naive_tokens:9d} {leaf:9d} {chain:9d} {per_chain:9d} "
                f"{n:7d} {tree.naive_tokens / n:7.1f}x {leaf / n:7.1f}x {chain / n:5.1f}x {per_chain / n:8.1f}x "
                f"{extends:6d}/{len(calls) - 1}"
            )


def real_group_report(sources: dict[str, list[list[CallRecord]]]) -> None:
    """Real episodes that open with the same prompt (one task, one harness) merged into one forest, per layout."""
    groups: dict[bytes, list[tuple[str, list[CallRecord]]]] = {}
    for label, episodes in sources.items():
        for calls in episodes:
            first = min(calls, key=lambda c: c.call_index)
            groups.setdefault(bytes(str(first.prompt_ids), "ascii"), []).append((label.removeprefix("real "), calls))
    for members in groups.values():
        if len(members) < 2:
            continue
        forest = build_forest([calls for _, calls in members])
        leaf, n = per_leaf_tokens(forest), forest.num_tokens
        chain = sum(per_chain_tokens(forest, calls) for _, calls in members)
        print(f"\n== real GRPO group: {' + '.join(name for name, _ in members)} merged into one forest ==")
        print(
            f"per-call {forest.naive_tokens}  per-leaf {leaf}  per-chain {chain}  forest {n}  "
            f"per-call/forest {forest.naive_tokens / n:.1f}x  per-leaf/forest {leaf / n:.1f}x  per-chain/forest {chain / n:.1f}x"
        )


def group_report(n_rollouts: int) -> None:
    print(f"\n== GRPO group: {n_rollouts} SYNTHETIC rollouts of one task merged into one forest ==")
    for style in ("claude-code", "openclaw"):
        group = synthetic_group(style, n_rollouts)
        forest = build_forest(group)
        singles = sum(build_tree(ep).num_tokens for ep in group)
        print(
            f"{style:12s} per-call {forest.naive_tokens:9d}  trees apart {singles:8d}  forest {forest.num_tokens:8d}  "
            f"per-call/forest {forest.naive_tokens / forest.num_tokens:5.1f}x  trainable {forest.num_trainable}"
        )


def tiny_model(attn: str, vocab: int) -> torch.nn.Module:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen3Config(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        max_position_embeddings=65_536,
        attn_implementation=attn,
    )
    return Qwen3ForCausalLM(cfg).train()


def _median_time(fn, repeats: int) -> tuple[float, float]:
    """Median wall and process-CPU seconds after a warm-up (CPU time is steadier on a shared box)."""
    fn()  # warm-up
    wall, cpu = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return statistics.median(wall), statistics.median(cpu)


def step_report(tree: PrefixTree, label: str, repeats: int, vocab: int) -> None:
    model = tiny_model("sdpa", vocab)
    packed = pack_tree(tree)
    naive = pack_naive(tree)
    inputs = packed.model_inputs("bool")

    def tree_step() -> None:
        model.zero_grad(set_to_none=True)
        lp = packed.token_logprobs(model(**inputs).logits)
        (-(lp * packed.loss_mask).sum()).backward()

    def naive_step() -> None:
        model.zero_grad(set_to_none=True)
        for i, row in enumerate(naive.rows):
            lp = naive.row_logprobs(i, model(input_ids=row[None]).logits)
            (-(lp * naive.loss_masks[i][naive.prompt_lens[i] :]).sum()).backward()

    t_tree, c_tree = _median_time(tree_step, repeats)
    t_naive, c_naive = _median_time(naive_step, repeats)
    print(
        f"{label:34s} tokens per-call {naive.num_tokens:7d} tree {len(packed):6d} ({naive.num_tokens / len(packed):4.1f}x)  "
        f"fwd+bwd wall per-call {t_naive:6.2f} s tree {t_tree:6.2f} s ({t_naive / t_tree:4.1f}x)  "
        f"cpu per-call {c_naive:6.2f} s tree {c_tree:6.2f} s ({c_naive / c_tree:4.1f}x)"
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--captures", nargs="*", type=Path, default=[], help="capture JSONL files (one episode each)")
    ap.add_argument(
        "--time-head", type=int, default=256, help="timing: shared head kept of real episodes / system prompt size of SYNTHETIC ones"
    )
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--group", type=int, default=8, help="rollouts in the SYNTHETIC GRPO group report")
    ap.add_argument("--max-time-tokens", type=int, default=12_000, help="skip timing of trees larger than this")
    args = ap.parse_args(argv)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    sources = load_sources(args.captures)
    shape = EpisodeShape()
    synthetic = {f"SYNTHETIC {style}": [synthetic_episode(style, shape=shape)] for style in ("claude-code", "openclaw")}
    token_report({**sources, **synthetic} if sources else synthetic)
    real_group_report(sources)
    group_report(args.group)
    print(f"\n== CPU fwd+bwd step, random-init tiny Qwen3 (sdpa; tree: bool tree mask), median of {args.repeats} ==")
    if any(label.startswith("real") for label in sources):
        print(
            f"(real episodes with the head every call shares cut to {args.time_head} tokens and ids renumbered 1:1 "
            "onto a compact vocab: same tree shape, CPU-sized)"
        )
        timed = {}
        for label, episodes in sources.items():
            timed[label] = [compact_vocab(trim_shared_head(calls, keep=args.time_head)) for calls in episodes]
    else:
        shape = EpisodeShape(system_tokens=args.time_head)
        timed = {
            f"SYNTHETIC {s} (sys {args.time_head})": [(synthetic_episode(s, shape=shape), shape.vocab_size)]
            for s in ("claude-code", "openclaw")
        }
    for label, episodes in timed.items():
        for i, (calls, vocab) in enumerate(episodes):
            tree = build_tree(calls)
            if tree.num_tokens > args.max_time_tokens:
                print(f"{label} #{i}: {tree.num_tokens} tokens > --max-time-tokens, skipped (dense mask memory)")
                continue
            step_report(tree, f"{label} #{i}", args.repeats, vocab)


if __name__ == "__main__":
    main()
