"""FlexAttention trees on CPU (``tree_flex``: compiled flex forward, BlockMask backward) against ``tree_sdpa``.

    python bench/flex_cpu.py                   # real Claude Code / OpenClaw trees + a 16k-token synthetic tree, 2 runs
    python bench/flex_cpu.py --runs 3 --repeats 5 --synthetic-tokens 32000

One training step = forward + backward of the mean -logprob of a pack's trained tokens through the tiny
Qwen3 (fp32, one thread). Each (workload, attention) cell runs in a fresh process with an empty inductor
cache, the two attentions alternating, so the figures sit side by side in one run: ``compile_s`` (the first
step's time above a steady step: tracing and the C++ build of flex's kernel; 0 for tree_sdpa beyond its
warm-up), ``step_s`` (median of ``--repeats`` steps), ``mask_s`` (building the pack's mask: the BlockMask,
or tree_sdpa's live blocks), ``peak_mib`` (the highest RSS sampled every 2 ms during the steps, above the RSS
before them). Prints one JSON line per cell, then a table with the spread over ``--runs``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ATTENTIONS = ("tree_sdpa", "tree_flex")


def _packs(workload: str, synthetic_tokens: int) -> list:
    from clawgym_env.tree import build_forest, build_tree, load_calls, pack_tree
    from clawgym_env.tree.synthetic import EpisodeShape, synthetic_group
    from clawgym_env.tree.transform import compact_vocab, trim_shared_head

    if workload == "synthetic":
        shape = EpisodeShape(
            n_calls=8,
            system_tokens=synthetic_tokens // 3,
            task_tokens=64,
            completion_tokens=(64, 256),
            tool_result_tokens=(128, 512),
            volatile_tokens=16,
            vocab_size=500,
        )
        return [pack_tree(build_forest(synthetic_group("openclaw", 4, shape, seed=0)))]
    calls = load_calls(ROOT / "tests" / "golden" / workload / "capture.jsonl.gz")
    calls = [c.model_copy(update={"token_source": "sampled"}) for c in calls]  # scripted captures: train on them
    calls, _ = compact_vocab(trim_shared_head(calls, keep=64))
    return [pack_tree(build_tree(calls))]


def _cell(workload: str, attn: str, repeats: int, synthetic_tokens: int, queue: mp.Queue) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from clawgym_env.models import tiny_model_path
    from clawgym_env.tree import register_tree_attention, register_tree_flex

    torch.set_num_threads(1)
    register_tree_attention()
    register_tree_flex()
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path(), attn_implementation=attn, dtype=torch.float32).train()
    pk = _packs(workload, synthetic_tokens)[0]
    t0 = time.perf_counter()
    inputs = pk.model_inputs("block" if attn == "tree_flex" else "tree")
    mask_s = time.perf_counter() - t0

    def step() -> float:
        t = time.perf_counter()
        model.zero_grad(set_to_none=True)
        lp = pk.token_logprobs(model(**inputs).logits)
        (-lp[pk.sampler_token].mean()).backward()
        return time.perf_counter() - t

    import psutil

    me, peak, done = psutil.Process(), [0], threading.Event()

    def sample() -> None:
        while not done.wait(0.002):
            peak[0] = max(peak[0], me.memory_info().rss)

    base = me.memory_info().rss
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    first = step()
    times = [step() for _ in range(repeats)]
    done.set()
    sampler.join()
    steady = statistics.median(times)
    queue.put(
        {
            "workload": workload,
            "attention": attn,
            "tokens": len(pk),
            "mask_s": mask_s,
            "first_step_s": first,
            "compile_s": max(0.0, first - steady),
            "step_s": steady,
            "peak_mib": max(0, peak[0] - base) / 2**20,
        }
    )


def run_cell(workload: str, attn: str, repeats: int, synthetic_tokens: int) -> dict:
    """One cell in a fresh process with an empty inductor cache (a cold compile, as a new job's first step)."""
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="inductor-") as cache:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
        queue: mp.Queue = ctx.Queue()
        proc = ctx.Process(target=_cell, args=(workload, attn, repeats, synthetic_tokens, queue))
        proc.start()
        while True:
            try:
                result = queue.get(timeout=5)
                break
            except Exception:  # queue.Empty: still running, or dead
                if not proc.is_alive():
                    raise SystemExit(f"the {workload}/{attn} cell died (exit {proc.exitcode}); its error is above") from None
        proc.join()
    return result


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=2, help="runs of every cell (the spread)")
    ap.add_argument("--repeats", type=int, default=3, help="timed steps per cell after the first")
    ap.add_argument("--synthetic-tokens", type=int, default=16000, help="about how many tokens the synthetic tree has")
    ap.add_argument("--workloads", default="claude-code,openclaw,synthetic")
    args = ap.parse_args(argv)
    print(f"load {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} CPUs", flush=True)
    cells: dict[tuple[str, str], list[dict]] = {}
    for r in range(args.runs):
        for workload in args.workloads.split(","):
            for attn in ATTENTIONS if r % 2 == 0 else ATTENTIONS[::-1]:
                res = run_cell(workload, attn, args.repeats, args.synthetic_tokens)
                print(json.dumps(res), flush=True)
                cells.setdefault((workload, attn), []).append(res)

    def span(rows: list[dict], key: str, fmt: str) -> str:
        vals = sorted(r[key] for r in rows)
        return format(vals[0], fmt) if len(vals) == 1 else f"{format(vals[0], fmt)}-{format(vals[-1], fmt)}"

    print(f"\n{'workload':<12} {'tokens':>7} {'attention':<10} {'mask_s':>11} {'compile_s':>11} {'step_s':>13} {'peak_mib':>11}")
    for (workload, attn), rows in cells.items():
        print(
            f"{workload:<12} {rows[0]['tokens']:>7} {attn:<10} {span(rows, 'mask_s', '.3f'):>11} "
            f"{span(rows, 'compile_s', '.2f'):>11} {span(rows, 'step_s', '.3f'):>13} {span(rows, 'peak_mib', '.0f'):>11}"
        )


if __name__ == "__main__":
    main()
