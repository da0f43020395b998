"""Harness matrix: per harness, a 20-call scripted episode at token level, measured (the harnesses/README.md table).

    python bench/harness_matrix.py [--harness codex,gemini-cli,...] [--repeats 2]

Each run is the h6-smoke ``many-files`` task (write f01..f20, one tool call each, then finish) in a
bwrap sandbox, served by a token-level ScriptedBackend with the SmolLM2 tokenizer and our
tools-capable ChatML template (as tests/golden/make_golden.py), so every call carries prompt and
completion ids. Per run it prints: calls captured vs the harness's own count, wire format and
streaming seen at the proxy, splice hit rate, per-call vs prefix-tree tokens, wall time, peak RSS
(summed over every process started under this one), and what changed between calls: calls that
extend the previous call's prompt + completion, tool lists that changed, tool-call ids we did not
issue, turns sent back without the reasoning we returned, and whether the first prompt is
byte-identical across runs. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "harnesses"))

from bench.harness import PeakRSS  # noqa: E402

SUITE = ROOT / "tests" / "harnesses" / "tasks" / "h6-smoke"
HARNESSES = "claude-code,claude-code-bash,openclaw,codex,gemini-cli,qwen-code,opencode,pi,mini-swe-agent,custom"


def own_count(harness: str, folder: Path) -> int | str:
    """The harness's own record of its model calls, from its record folder next to the capture."""
    from clawgym_env.harness_registry import load_harness

    try:
        n = load_harness(harness).count_calls(folder)
    except (OSError, ValueError, KeyError) as exc:
        return f"? ({type(exc).__name__})"
    return "-" if n is None else n


def changes(calls: list[Any], issued: set[str]) -> dict[str, Any]:
    """What the harness changed between consecutive calls, seen in the neutral capture."""
    from clawgym_env.proxy._neutral import message_key

    ordered = sorted(calls, key=lambda c: c.call_index)
    extends = sum(
        1
        for a, b in itertools.pairwise(ordered)
        if a.prompt_ids
        and b.prompt_ids
        and b.prompt_ids[: len(a.prompt_ids) + len(a.completion_ids or [])] == list(a.prompt_ids) + list(a.completion_ids or [])
    )
    tool_lists = {json.dumps(c.tools, sort_keys=True) for c in ordered}
    tool_orders = {tuple(t["function"]["name"] for t in c.tools) for c in ordered}
    foreign_ids = {
        tc["id"]
        for c in ordered
        for m in c.messages
        if m.get("role") == "assistant"
        for tc in m.get("tool_calls") or ()
        if tc.get("id") not in issued
    }
    sent = {message_key(c.response): c.response for c in ordered if c.response}
    dropped_reasoning = sum(
        1
        for c in ordered
        for m in c.messages
        if m.get("role") == "assistant"
        and message_key(m) in sent
        and sent[message_key(m)].get("reasoning_content")
        and not m.get("reasoning_content")
    )
    systems = {c.messages[0]["content"] for c in ordered if c.messages and c.messages[0]["role"] == "system"}
    return {
        "extends_prev": f"{extends}/{len(ordered) - 1}",
        "tool_lists": len(tool_lists),
        "tool_orders": len(tool_orders),
        "foreign_tool_ids": len(foreign_ids),
        "dropped_reasoning": dropped_reasoning,
        "system_prompts": len(systems),
    }


def policy(request: Any) -> Any:
    """The golden 20-file policy, with a reasoning part on the first call (to see if it comes back)."""
    import gym_policy

    obs = {"messages": json.dumps(request.messages), "tools": json.dumps(request.tools)}
    action = gym_policy.many_files_policy(obs)
    if isinstance(action, dict) and request.call_index == 0:
        action = {**action, "reasoning": "Twenty files, one call each."}
    return action


async def one_run(harness: str, tok: Any, sandbox: str) -> dict[str, Any]:
    from clawgym_env.episode import run_episode
    from clawgym_env.proxy import ScriptedBackend
    from clawgym_env.task import load_suite
    from clawgym_env.tree import build_tree

    spec = load_suite(SUITE).get("many-files")
    with tempfile.TemporaryDirectory() as tmp:
        with PeakRSS() as mem:
            t0 = time.perf_counter()
            r = await run_episode(spec, harness, ScriptedBackend(policy, tokenizer=tok), capture_dir=Path(tmp), sandbox=sandbox)
            wall = time.perf_counter() - t0
        own = own_count(harness, Path(tmp) / f"{r.session_id}.harness")
    good = [c for c in r.calls if c.prompt_ids and c.completion_ids]
    tree = build_tree(good) if good else None
    issued = {tc["id"] for c in r.calls if c.response for tc in c.response.get("tool_calls") or ()}
    return {
        "status": r.status,
        "score": r.score,
        "calls": len(r.calls),
        "own": own,
        "error": (r.error or "")[:200],
        "wire": sorted({(c.dialect, c.path.split("?")[0], c.stream) for c in r.calls}),
        "splice": r.splice_hit_rate,
        "per_call": tree.naive_tokens if tree else 0,
        "tree": tree.num_tokens if tree else 0,
        "wall": wall,
        "harness_s": r.timings.get("harness", 0.0),
        "peak_mib": mem.peak / 2**20,
        "egress": r.egress_attempts,
        "first_prompt": r.calls[0].prompt_ids if r.calls else None,
        "logprobs_everywhere": all(c.logprobs is not None and len(c.logprobs) == len(c.completion_ids or []) for c in good),
        **changes(r.calls, issued),
    }


def main() -> None:
    from transformers import AutoTokenizer

    from clawgym_env.models import default_model_path

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--harness", default=HARNESSES)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--sandbox", default="bwrap")
    a = p.parse_args()
    tok = AutoTokenizer.from_pretrained(default_model_path())
    print(
        f"machine: {psutil.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB RAM; sandbox {a.sandbox}"
    )
    for h in a.harness.split(","):
        runs = [asyncio.run(one_run(h, tok, a.sandbox)) for _ in range(a.repeats)]
        for i, r in enumerate(runs):
            show = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items() if k != "first_prompt"}
            print(f"{h} run {i}: {json.dumps(show)}")
        walls, peaks = [r["wall"] for r in runs], [r["peak_mib"] for r in runs]
        same_first = len({json.dumps(r["first_prompt"]) for r in runs}) == 1
        r0 = runs[0]
        print(
            f"SUMMARY {h}: calls {r0['calls']} (own {r0['own']}), splice {r0['splice']:.3f}, per-call {r0['per_call']} "
            f"vs tree {r0['tree']} ({r0['per_call'] / max(r0['tree'], 1):.1f}x), wall {min(walls):.1f}-{max(walls):.1f} s, "
            f"peak {min(peaks):.0f}-{max(peaks):.0f} MiB, first prompt identical across runs: {same_first}, "
            f"extends {r0['extends_prev']}, tool lists {r0['tool_lists']}, foreign ids {r0['foreign_tool_ids']}, "
            f"dropped reasoning {r0['dropped_reasoning']}, egress {r0['egress']}",
            flush=True,
        )


if __name__ == "__main__":
    main()
