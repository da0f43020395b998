"""The in-process HFBackend: tokens/s at 1/4/16 concurrent calls, batched vs not, and prefix-reuse savings.

    python bench/backend_hf.py [--models tiny,smollm2] [--concurrency 1,4,16] [--max-tokens 32]
                               [--prompt-tokens 128] [--prefix-tokens 3184] [--threads 1]

Throughput: each concurrency level sends that many calls at once (distinct seeds, temperature 1,
a chat-templated prompt of about --prompt-tokens tokens, completion budgets spread over 1/4..4/4
of --max-tokens so calls end at different steps), to a continuously batching backend and to one
with ``max_batch=1`` (a call at a time), both without prefix reuse, timed end to end, prefill
included. Prefix reuse: SmolLM2's first call of a second episode whose prompt shares its first
--prefix-tokens ids with the first episode's (the recorded Claude Code prompt of tests/golden;
3,184 is claude-code-bash's whole first prompt), timed with and without the shared store. Prints
figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import time
from pathlib import Path

from clawgym_env.models.smollm2 import default_model_path
from clawgym_env.models.testing import tiny_model_path
from clawgym_env.proxy.backends.base import CompletionRequest
from clawgym_env.proxy.backends.hf import HFBackend

WORDS = "please read the config file and tell me which tests fail and why they fail today".split()
GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "golden" / "claude-code" / "capture.jsonl.gz"


def make_prompt(backend: HFBackend, n_tokens: int) -> list[int]:
    text, ids = "", []
    while len(ids) < n_tokens:
        text += " ".join(WORDS) + " "
        rendered = backend.tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False)
        ids = backend.tokenizer.encode(rendered, add_special_tokens=False)
    return ids


async def burst(backend: HFBackend, prompt: list[int], n: int, max_tokens: int) -> tuple[float, int]:
    """n calls at once; (wall seconds, completion tokens)."""
    reqs = [
        CompletionRequest(
            session_id=f"b{i}",
            call_index=0,
            prompt_ids=prompt,
            messages=[],
            temperature=1.0,
            seed=i,
            max_tokens=max(1, max_tokens * (1 + i % 4) // 4),
        )
        for i in range(n)
    ]
    t0 = time.perf_counter()
    outs = await asyncio.gather(*(backend.handle(r) for r in reqs))
    return time.perf_counter() - t0, sum(len(o.completion_ids or []) for o in outs)


async def throughput(name: str, path: Path, levels: list[int], prompt_tokens: int, max_tokens: int) -> None:
    batched = HFBackend(path, max_batch=max(levels), prefix_cache_mb=0, eos_token_ids=[])
    single = HFBackend(path, max_batch=1, prefix_cache_mb=0, eos_token_ids=[])
    prompt = make_prompt(batched, prompt_tokens)
    for b in (batched, single):
        await burst(b, prompt, 1, 4)  # warm-up
    for n in levels:
        row = []
        for b in (single, batched):
            wall, tokens = await burst(b, prompt, n, max_tokens)
            row.append((wall, tokens))
        (ws, ts), (wb, tb) = row
        print(f"{name:<8} {n:>4} {len(prompt):>6} {ts:>6} | {ts / ws:>9.1f} {ws:>7.2f} | {tb / wb:>9.1f} {wb:>7.2f} | {ws / wb:>5.2f}x")
    print(
        f"{name:<8} continuous batch: {batched.stats['steps']} decode steps, {batched.stats['joins']} joins, "
        f"largest {batched.stats['max_rows']} rows"
    )
    await batched.aclose()
    await single.aclose()


async def prefix_saving(shared_tokens: list[int]) -> None:
    with gzip.open(GOLDEN, "rt") as f:
        golden = json.loads(f.readline())["prompt_ids"]  # Claude Code's first prompt, SmolLM2 ids (12,418)
    for shared in shared_tokens:
        head = golden[: min(shared, 8000)]
        backends = {
            "no reuse": HFBackend(default_model_path(), prefix_cache_mb=0),
            "shared store": HFBackend(default_model_path(), prefix_cache_mb=2048),
        }
        tails = [
            b.tokenizer.encode(f"<|im_start|>user\nepisode {i}: {' '.join(WORDS[i:])}<|im_end|>\n<|im_start|>assistant\n")
            for i, b in enumerate(backends.values())
        ]
        for label, b in backends.items():
            first = CompletionRequest(session_id="ep1", call_index=0, prompt_ids=head + tails[0], messages=[], max_tokens=1, seed=0)
            second = CompletionRequest(session_id="ep2", call_index=0, prompt_ids=head + tails[1], messages=[], max_tokens=1, seed=0)
            t0 = time.perf_counter()
            await b.handle(first)
            t1 = time.perf_counter()
            out = await b.handle(second)
            t2 = time.perf_counter()
            print(
                f"smollm2  prefix {len(head):>5} + tail {len(tails[1]):>3} tokens, {label:<12}: episode 1 first call "
                f"{t1 - t0:6.2f} s, episode 2 first call {t2 - t1:6.2f} s (reused {out.usage['cached_prompt_tokens']} "
                f"tokens, store {b.prefix.bytes / 2**20:.0f} MiB)"
            )
            await b.aclose()


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="tiny,smollm2")
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--prefix-tokens", default="3184", help="shared prompt lengths for the prefix-reuse figure ('' skips it)")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads after loading (0: the backend's default)")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} {os.getloadavg()[2]:.1f}, {os.cpu_count()} CPUs")
    paths = {"tiny": tiny_model_path, "smollm2": default_model_path}
    levels = [int(c) for c in args.concurrency.split(",")]
    print(f"{'model':<8} {'conc':>4} {'prompt':>6} {'tokens':>6} | {'1-at-a-time tok/s':>17} | {'continuous tok/s':>17} | speedup")
    for name in args.models.split(","):
        if args.threads:
            import torch

            torch.set_num_threads(args.threads)
        await throughput(name, paths[name](), levels, args.prompt_tokens, args.max_tokens)
    if args.prefix_tokens:
        await prefix_saving([int(n) for n in args.prefix_tokens.split(",")])


if __name__ == "__main__":
    asyncio.run(main())
