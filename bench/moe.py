"""What routing capture and replay cost, side by side in one run: capture size, and the train step with and without
routing, per call and per tree.

Data: one step's rollouts of the tiny MoE (4 experts, top-2, 2 layers) through a real harness (default
``claude-code-bash``, in bwrap; ``--harness custom`` for the small prompts), sampled by the in-process HF backend, which
captures the routing.

- capture: bytes per call of the capture files (format 2) with the routing and with it stripped, and the routing's
  bytes had each line stored its rows whole (no reference to the earlier call's rows);
- step (per tree): the trainer's ``train_step`` on the same batch (forward with the tree mask, backward, AdamW), as
  ``--routing_replay false --log_unreplayed_mismatch false`` (the routing ignored), ``--routing_replay`` (replayed),
  and replayed plus the unreplayed mismatch forward (the default);
- step (per call): one forward + backward of every call on its own (the per-call layout), routing ignored vs replayed.

Each timing cell is run ``--repeats`` times, the arms interleaved; the table prints the median and the spread (min-max).

    python bench/moe.py                       # claude-code-bash, 2 groups x 2 episodes, 3 repeats
    python bench/moe.py --harness custom --repeats 5
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SUITE = ROOT / "trainers" / "suites" / "toy-rl"


def sample(harness: str, groups: int, episodes: int, model: Path) -> tuple[Any, list[list[Any]]]:
    """One step's batch and every episode's call records."""
    import random

    from clawgym_env._sync import run_sync
    from clawgym_env.proxy.backends.hf import HFBackend
    from clawgym_env.task import load_suite
    from trainers.rollout import build_batch, collect_episodes, tree_filters

    backend = HFBackend(model, seed=0)
    try:
        done = collect_episodes(
            [load_suite(SUITE).get("say-short")],
            [harness],
            [1.0],
            backend,
            pairs_per_step=groups,
            num_generations=episodes,
            rng=random.Random(0),
            sampling={"max_tokens": 16, "temperature": 1.0},
        )
    finally:
        run_sync(backend.aclose())
    batch = build_batch(
        done, filters=tree_filters(drop_retries=True, max_leaves=None, exclude_subagents=False), policy_version=0, skip_zero_variance=False
    )
    return batch, [list(ep.calls) for _, _, eps in done for ep in eps]


def capture_sizes(episodes: list[list[Any]], folder: Path) -> dict[str, float]:
    """Bytes per call of the episodes' capture files with and without routing, and the routing stored whole."""
    from clawgym_env.capture import CaptureWriter

    def write(name: str, strip: bool) -> int:
        total = 0
        for i, calls in enumerate(episodes):
            path = folder / f"{name}-{i}.jsonl"
            w = CaptureWriter(path, fsync=False)
            for c in calls:
                w.write(c.model_copy(update={"routing": None}) if strip else c)
            w.close()
            total += path.stat().st_size
        return total

    n = sum(len(e) for e in episodes)
    with_routing, without = write("routed", False), write("plain", True)
    whole = sum(len(c.routing.line_json()["ids"]) for e in episodes for c in e if c.routing is not None)
    tokens = sum(c.routing.tokens for e in episodes for c in e if c.routing is not None)
    return {
        "calls": n,
        "bytes/call with routing": with_routing / n,
        "bytes/call without": without / n,
        "routing bytes/call (delta)": (with_routing - without) / n,
        "routing bytes/call (whole rows)": whole / n,
        "routed tokens/call": tokens / n,
    }


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def tree_arms(batch: Any, model: Path, out: Path) -> dict[str, Callable[[], Any]]:
    """The trainer's train_step on a copy of the batch, three ways (built once each: model load is not timed)."""
    from trainers.tree_grpo.config import TreeGRPOConfig
    from trainers.tree_grpo.trainer import TreeGRPOTrainer

    def trainer(name: str, **kw: Any) -> Callable[[], Any]:
        cfg = TreeGRPOConfig(
            output_dir=str(out / name),
            suite=str(SUITE),
            harness="custom",
            max_completion_length=16,
            learning_rate=1e-6,
            max_steps=1000,
            save_steps=0,
            num_generations=2,
            pairs_per_step=1,
            seed=0,
            **kw,
        )
        t = TreeGRPOTrainer(cfg, model)
        t.sync_weights = lambda: None  # the weight push to the rollout side is not what is compared
        return lambda: t.train_step(copy.deepcopy(batch))

    return {
        "tree: routing ignored": trainer("plain", routing_replay=False, log_unreplayed_mismatch=False),
        "tree: replayed": trainer("replay", routing_replay=True, log_unreplayed_mismatch=False),
        "tree: replayed + unreplayed metrics": trainer("metrics", routing_replay=True, log_unreplayed_mismatch=True),
    }


def call_arms(batch: Any, model_path: Path) -> dict[str, Callable[[], Any]]:
    """Forward + backward of every call alone (sdpa, causal), routing ignored vs replayed."""
    import torch
    from transformers import AutoModelForCausalLM

    from clawgym_env.tree import pack_naive
    from trainers.core.routing import RoutingReplay

    model = AutoModelForCausalLM.from_pretrained(model_path, attn_implementation="sdpa")
    replay = RoutingReplay.attach(model)
    assert replay is not None
    layouts = [pack_naive(g.tree) for g in batch.groups]

    def run(use: bool) -> None:
        for naive in layouts:
            for i in range(len(naive.rows)):
                replay.load(naive.routing[i] if use else None, replay=use)
                lp = naive.row_logprobs(i, model(input_ids=naive.rows[i][None]).logits)
                (-(lp * naive.loss_masks[i][naive.prompt_lens[i] :]).sum()).backward()
        model.zero_grad(set_to_none=True)
        torch.set_grad_enabled(True)

    return {"per call: routing ignored": lambda: run(False), "per call: replayed": lambda: run(True)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--harness", default="claude-code-bash")
    p.add_argument("--groups", type=int, default=2)
    p.add_argument("--episodes", type=int, default=2, help="episodes per group")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()

    from clawgym_env.models import tiny_moe_model_path

    model = tiny_moe_model_path()
    t0 = time.perf_counter()
    batch, episodes = sample(args.harness, args.groups, args.episodes, model)
    print(
        f"sampled {len(episodes)} episodes of {args.harness} in {time.perf_counter() - t0:.1f} s; "
        f"{len(batch.groups)} groups train; tree tokens {[g.tree.num_tokens for g in batch.groups]}, per-call tokens "
        f"{[g.tree.naive_tokens for g in batch.groups]}; routing split: "
        + ", ".join(f"{k.split('/')[1]} {v:g}" for k, v in batch.metrics.items() if k.startswith("routing/"))
    )
    with tempfile.TemporaryDirectory(prefix="clawgym-bench-moe-") as tmp:
        print("\ncapture (format 2, this batch's episodes)")
        for k, v in capture_sizes(episodes, Path(tmp)).items():
            print(f"  {k:34s} {v:12,.1f}")
        arms = {**tree_arms(batch, model, Path(tmp)), **call_arms(batch, model)}
        for fn in arms.values():  # warm-up: first forward paths, allocator
            fn()
        times: dict[str, list[float]] = {k: [] for k in arms}
        for _ in range(args.repeats):
            for name, fn in arms.items():
                times[name].append(timed(fn))
    print(f"\ntrain step, seconds ({args.repeats} repeats, arms interleaved; median [min-max]; vs the arm's 'ignored')")
    for name, ts in times.items():
        base = times["tree: routing ignored" if name.startswith("tree") else "per call: routing ignored"]
        ratio = statistics.median(ts) / statistics.median(base)
        print(f"  {name:38s} {statistics.median(ts):8.3f} [{min(ts):.3f}-{max(ts):.3f}]  x{ratio:.2f}")


if __name__ == "__main__":
    main()
