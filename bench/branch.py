"""Branching a real harness mid-episode: replay fidelity and what a leaf costs, branching vs independent.

    python bench/branch.py [--harness claude-code,openclaw] [--calls 8] [--replays 10] [--leaves 4]
                           [--policy scripted,tiny] [--max_tokens 64]

Per harness: one recorded root episode (h6-smoke ``many-files``, a token-level scripted policy
writing one file per call, ``--calls`` model calls), then

- fidelity: ``--replays`` replays at random k in 1..calls-1 (seeded); the share that reach call k
  with every request matching its recording (target >= 95%), and how many had identical prompt ids;
  each replay that did not reach k is printed with why (its first differing message, or how the
  episode ended without a divergence);
- cost per leaf at the same number of leaves: ``--leaves`` independent episodes from scratch vs the
  root plus ``--leaves - 1`` branches at random k; model tokens generated per leaf and harness
  seconds per leaf; and the tree-vs-per-call token ratio of each group's forest.

``--policy tiny`` samples the continuations (of the fidelity replays too, and the independent episodes) with the tiny Qwen3
model instead of the scripted policy (its episodes end when it stops calling tools).
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

SUITE = Path(__file__).resolve().parents[1] / "tests" / "harnesses" / "tasks" / "h6-smoke"
WRITE = {"claude-code": ("Write", "file_path", "/workspace/"), "openclaw": ("write", "path", "")}


def scripted(harness: str, calls: int, tokenizer: Any, tag: str) -> Any:
    from clawgym_env.proxy import ScriptedBackend

    tool, arg, root = WRITE[harness]
    replies: list[Any] = [
        {"tool_calls": [{"name": tool, "arguments": {arg: f"{root}f{i + 1:02d}.txt", "content": f"{tag} {i + 1:02d}\n"}}]}
        for i in range(calls - 1)
    ]
    return ScriptedBackend(replies + ["Done."], tokenizer=tokenizer, default="Done.")


async def episode(
    spec: Any, harness: str, backend: Any, proxy: Any, tmp: Path, sampling: dict[str, Any] | None = None
) -> tuple[Any, float]:
    from clawgym_env.episode import run_episode

    t0 = time.perf_counter()
    r = await run_episode(spec, harness, backend, proxy=proxy, capture_dir=tmp, sampling=sampling)
    return r, time.perf_counter() - t0


def generated(calls: list[Any], replayed: bool) -> int:
    """Completion tokens the policy produced (replayed calls cost nothing)."""
    return sum(len(c.completion_ids or ()) for c in calls if not (replayed and c.meta.get("replayed_from")))


async def bench(harness: str, a: argparse.Namespace, policy_kind: str, tok: Any, tiny: Any) -> None:
    from clawgym_env.proxy import ProxyServer
    from clawgym_env.proxy.backends.replay import ReplayBackend
    from clawgym_env.task import load_suite
    from clawgym_env.tree import build_forest

    spec = load_suite(SUITE).get("many-files")
    rng = random.Random(a.seed)
    sampling = {"max_tokens": a.max_tokens} if policy_kind == "tiny" else None  # scripted replies are never cut

    def policy(tag: str, k: int = 0) -> Any:
        """The continuation policy from call k (scripted: the root's remaining calls, other contents)."""
        return tiny if policy_kind == "tiny" else scripted(harness, a.calls - k, tok, tag)

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        async with ProxyServer(uds_path=tmp / "proxy.sock") as proxy:
            root, root_s = await episode(spec, harness, scripted(harness, a.calls, tok, "root"), proxy, tmp)
            n = len(root.calls)
            if root.status != "completed" or n < 2:
                print(f"{harness}: root episode {root.status} with {n} calls ({root.error}); nothing to branch")
                return
            # fidelity
            reached = ids_equal = replayed = 0
            misses = []
            for _ in range(a.replays):
                k = rng.randint(1, n - 1)
                rb = ReplayBackend(root.calls, k, policy("fid", k))
                r, secs = await episode(spec, harness, rb, proxy, tmp, sampling)
                print(
                    f"{harness:12} [{policy_kind}]   replay: branch_at {k}, "
                    f"{'reached' if rb.report.reached_branch else 'MISSED'}, {secs:.0f} s",
                    flush=True,
                )  # partial runs say something
                reached += rb.report.reached_branch
                ids_equal += rb.report.prompt_ids_equal
                replayed += rb.report.replayed
                if not rb.report.reached_branch:
                    misses.append((k, rb.report, r))
            print(
                f"{harness:12} [{policy_kind}] replay fidelity: {reached}/{a.replays} reached call k with every "
                f"request matching ({reached / a.replays:.0%}); prompt ids identical on {ids_equal}/{replayed} "
                f"replayed calls; root episode {n} calls, {root_s:.1f} s"
            )
            for k, rep, r in misses:  # a divergence, or an episode that never got to call k (say why)
                d = rep.divergence
                why = (
                    (
                        f"diverged at call {d.call_index}, message {d.message_index}: recorded {str(d.recorded)[:300]!r}, "
                        f"got {str(d.got)[:300]!r}"
                    )
                    if d
                    else (
                        f"no divergence, but the episode ended {r.status} after calls "
                        f"{rep.calls} ({r.error}; {r.harness_output_tail[-300:]!r})"
                    )
                )
                print(f"{harness:12} [{policy_kind}]   branch_at {k}: {why}")
            # independent leaves
            ind_eps, ind_s = [], []
            for j in range(a.leaves):
                r, s = await episode(spec, harness, policy(f"ind{j}"), proxy, tmp, sampling)
                ind_eps.append(r.calls)
                ind_s.append(s)
            # branching: the root is one leaf, then leaves - 1 branches
            br_eps, br_s = [root.calls], [root_s]
            for j in range(a.leaves - 1):
                k = rng.randint(1, n - 1)
                r, s = await episode(spec, harness, ReplayBackend(root.calls, k, policy(f"br{j}", k)), proxy, tmp, sampling)
                br_eps.append(r.calls)
                br_s.append(s)
            for name, eps, secs, rep in (("independent", ind_eps, ind_s, False), ("branching", br_eps, br_s, True)):
                gen = sum(generated(e, rep) for e in eps)
                forest = build_forest(eps)
                ratio = forest.naive_tokens / max(1, forest.num_tokens)
                print(
                    f"{harness:12} [{policy_kind}] {name:11}: {len(eps)} leaves, {gen / len(eps):.0f} model tokens "
                    f"generated per leaf, {statistics.mean(secs):.1f} harness s per leaf; forest {forest.num_tokens} "
                    f"tokens vs {forest.naive_tokens} per-call ({ratio:.1f}x)"
                )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--harness", default="claude-code,openclaw")
    p.add_argument("--calls", type=int, default=8, help="model calls in the root episode")
    p.add_argument("--replays", type=int, default=10)
    p.add_argument("--leaves", type=int, default=4)
    p.add_argument("--policy", default="scripted,tiny")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max_tokens", type=int, default=64, help="per call, tiny-model episodes (the harness asks for far more)")
    a = p.parse_args()
    from transformers import AutoTokenizer

    from clawgym_env.models.testing import tiny_model_path

    tok = AutoTokenizer.from_pretrained(tiny_model_path())
    tiny = None
    if "tiny" in a.policy:
        from clawgym_env.proxy.backends.hf import HFBackend

        tiny = HFBackend(tiny_model_path(), seed=a.seed)
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    for kind in a.policy.split(","):
        for h in a.harness.split(","):
            asyncio.run(bench(h, a, kind, tok, tiny))


if __name__ == "__main__":
    main()
