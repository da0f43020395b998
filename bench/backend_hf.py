"""Throughput of the in-process HFBackend on CPU: completion tokens/s at batch 1, 4 and 8.

    python bench/backend_hf.py [--models tiny,smollm2] [--max-tokens 32] [--prompt-tokens 128] [--threads 1] [--episode 2048]

Each batch size sends that many concurrent requests (distinct seeds, temperature 1, a
chat-templated prompt of about --prompt-tokens tokens) and times them end to end, prefill
included. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from clawgym_env.models.smollm2 import default_model_path
from clawgym_env.models.testing import tiny_model_path
from clawgym_env.proxy.backends.base import CompletionRequest
from clawgym_env.proxy.backends.hf import HFBackend

WORDS = ["please", "read", "the", "config", "file", "and", "tell", "me", "which", "tests", "fail", "and", "why", "they", "fail", "today"]


def make_prompt(backend: HFBackend, n_tokens: int) -> list[int]:
    text, ids = "", []
    while len(ids) < n_tokens:
        text += " ".join(WORDS) + " "
        rendered = backend.tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False)
        ids = backend.tokenizer.encode(rendered, add_special_tokens=False)
    return ids


async def run(backend: HFBackend, prompt: list[int], batch: int, max_tokens: int) -> tuple[float, int]:
    reqs = [
        CompletionRequest(session_id=f"b{i}", call_index=0, prompt_ids=prompt, messages=[], max_tokens=max_tokens, temperature=1.0, seed=i)
        for i in range(batch)
    ]
    t0 = time.perf_counter()
    outs = await asyncio.gather(*(backend.handle(r) for r in reqs))
    return time.perf_counter() - t0, sum(len(o.completion_ids or []) for o in outs)


async def episode(path, prompt_tokens: int) -> None:
    """Second call of an agent episode (prompt = last prompt + completion + a short turn), with and without prefix reuse."""
    for mb in (1024.0, 0.0):
        backend = HFBackend(path, prefix_cache_mb=mb)
        prompt = make_prompt(backend, prompt_tokens)
        first = CompletionRequest(session_id="ep", call_index=0, prompt_ids=prompt, messages=[], max_tokens=8, seed=0)
        t0 = time.perf_counter()
        out = await backend.handle(first)
        t1 = time.perf_counter()
        turn = backend.tokenizer.encode("<|im_end|>\n<|im_start|>user\nthe tests pass now, continue<|im_end|>\n<|im_start|>assistant\n")
        follow = prompt + (out.completion_ids or []) + turn
        second = CompletionRequest(session_id="ep", call_index=1, prompt_ids=follow, messages=[], max_tokens=8, seed=1)
        t2 = time.perf_counter()
        out2 = await backend.handle(second)
        t3 = time.perf_counter()
        print(f"{path.name[:8]:<8} prefix_cache_mb={mb:<6} prompt {len(prompt):>5} -> {len(follow):>5} tokens: "
              f"call 1 {t1 - t0:6.2f} s, call 2 {t3 - t2:6.2f} s (reused {out2.usage.get('cached_prompt_tokens', 0)} tokens)")
        await backend.aclose()


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="tiny,smollm2")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--batches", default="1,4,8")
    ap.add_argument("--episode", type=int, default=0, help="also time a 2-call episode with a prompt of this many tokens")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    args = ap.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)  # on a shared, oversubscribed box, 1 avoids OpenMP spin-waits
    paths = {"tiny": tiny_model_path, "smollm2": default_model_path}
    print(f"{'model':<8} {'batch':>5} {'prompt':>6} {'tokens':>6} {'wall s':>7} {'tok/s':>8} {'s/call':>7}")
    for name in args.models.split(","):
        backend = HFBackend(paths[name](), max_batch=max(int(b) for b in args.batches.split(",")))
        prompt = make_prompt(backend, args.prompt_tokens)
        await run(backend, prompt, 1, 4)  # warm-up
        for batch in (int(b) for b in args.batches.split(",")):
            wall, tokens = await run(backend, prompt, batch, args.max_tokens)
            print(f"{name:<8} {batch:>5} {len(prompt):>6} {tokens:>6} {wall:>7.2f} {tokens / wall:>8.1f} {wall:>7.2f}")
        print(f"{name:<8} batches run: {backend.stats['batches']}, largest: {backend.stats['max_rows']} rows")
        await backend.aclose()
    for name in args.models.split(",") if args.episode else ():
        await episode(paths[name](), args.episode)


if __name__ == "__main__":
    asyncio.run(main())
