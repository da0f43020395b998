"""Branch points, subtree values and TreeRL step advantages on a toy forest of a root and two branches."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from clawgym_env.capture.records import CallRecord
from clawgym_env.errors import ConfigError
from clawgym_env.tree import build_forest
from trainers.branching import branch_points, call_surprisal, node_values, step_advantages


def call(
    session: str, i: int, prompt: list[int], completion: list[int], logprobs: list[float] | None = None, error: str | None = None
) -> CallRecord:
    return CallRecord(
        session_id=session,
        call_index=i,
        dialect="openai-chat",
        path="/v1/chat/completions",
        prompt_ids=prompt,
        completion_ids=completion,
        logprobs=logprobs or [-0.1] * len(completion),
        error=error,
        status=500 if error else 200,
    )


def episode(session: str, turns: list[list[int]], logprobs: list[list[float]] | None = None) -> list[CallRecord]:
    """Calls that each extend the last prompt by its completion and a 2-token tool result."""
    out, prompt = [], [1, 2, 3]
    for i, c in enumerate(turns):
        out.append(call(session, i, list(prompt), c, logprobs[i] if logprobs else None))
        prompt = prompt + c + [90 + i, 91 + i]
    return out


ROOT = [[10, 11], [20, 21], [30, 31]]


def test_branch_points_skip_call_zero_and_failed_calls() -> None:
    calls = episode("root", ROOT)
    ks = branch_points(calls, 50, rng=random.Random(1))
    assert set(ks) == {1, 2}
    calls[1] = calls[1].model_copy(update={"error": "boom"})
    assert set(branch_points(calls, 20, rng=random.Random(1))) == {1}  # up to the failed call, not past it


def test_entropy_mode_branches_where_the_policy_was_least_sure() -> None:
    calls = episode("root", ROOT, logprobs=[[-0.1, -0.1], [-0.1, -0.2], [-2.0, -3.0]])
    assert call_surprisal(calls[2]) == pytest.approx(2.5)
    assert branch_points(calls, 3, mode="entropy") == [2, 1, 2]
    with pytest.raises(ConfigError, match="uniform"):
        branch_points(calls, 1, mode="best")  # type: ignore[arg-type]


def test_values_and_step_advantages_credit_the_step_taken_at_the_branch() -> None:
    root = episode("root", ROOT)
    win = episode("win", [ROOT[0], [25, 26], [35, 36]])  # branched at call 1, took another step, passed
    lose = episode("lose", [ROOT[0], ROOT[1], [40, 41]])  # branched at call 2, failed
    rewards = {"root": 1.0, "win": 1.0, "lose": 0.0}
    tree = build_forest([root, win, lose])
    values = node_values(tree, rewards)
    adv = step_advantages(tree, rewards)
    by_first = {n.tokens[0]: n for n in tree.nodes()}
    trunk = next(n for n in tree.nodes() if n.depth == 0)
    assert values[id(tree.root)] == pytest.approx(2 / 3) and values[id(trunk)] == pytest.approx(2 / 3)
    assert adv[id(trunk)] == pytest.approx(0.0)  # everyone walked it: no credit either way
    assert values[id(by_first[25])] == 1.0 and adv[id(by_first[25])] > 0  # the winning step at call 1
    assert values[id(by_first[40])] == 0.0 and adv[id(by_first[40])] < 0  # the losing step at call 2
    # the root's own call 2 beat the loser's at the same branch point
    assert adv[id(by_first[30])] > 0


@pytest.mark.sandbox
def test_a_branched_group_runs_through_the_executor_and_shares_the_replayed_calls(tmp_path) -> None:
    """Custom harness in bwrap, local executor: 1 root, 3 branches; replayed calls are the root's tokens."""
    from transformers import AutoTokenizer

    from clawgym_env._sync import LoopThread
    from clawgym_env.models.testing import tiny_model_path
    from clawgym_env.proxy import ScriptedBackend
    from clawgym_env.task import load_suite
    from trainers.branching import sample_branched_groups
    from trainers.rollout_stream import RolloutStream, local_executor

    suite = load_suite(Path(__file__).resolve().parents[1] / "harnesses" / "tasks" / "h6-smoke")
    task = suite.get("many-files")
    draw = random.Random(7)

    def policy(request):  # three writes with random contents, then done: branches differ from the root
        done = sum(1 for m in request.messages if m.get("role") == "tool")
        if done >= 3:
            return "Done."
        return {"tool_calls": [{"name": "write", "arguments": {"path": f"f{done + 1:02d}.txt", "content": f"{draw.random():.6f}\n"}}]}

    backend = ScriptedBackend(policy, tokenizer=AutoTokenizer.from_pretrained(tiny_model_path()))
    loop = LoopThread()
    executor = local_executor([task], ["custom"], backend, sandbox="bwrap", sampling=None, concurrency=2, wall_time_s=120)
    loop.run(executor.start())
    stream = RolloutStream(executor, loop, num_generations=1, next_pair=lambda: (task, "custom"))
    try:
        [eps] = sample_branched_groups(stream, [(task, "custom")], roots=1, points=3, workdir=tmp_path, rng=random.Random(3))
    finally:
        stream.close()
        loop.run(executor.stop())
        loop.close()
    root, branches = eps[0], eps[1:]
    assert len(branches) == 3 and all(ep.status == "completed" for ep in eps), [(e.status, e.error) for e in eps]
    for b in branches:
        k = next(c.call_index for c in b.calls if "branch_at" in c.meta)
        assert 1 <= k < len(root.calls)
        for a, c in zip(root.calls[:k], b.calls[:k], strict=True):
            assert c.meta["replayed_from"] == root.session_id and c.completion_ids == a.completion_ids
            assert c.token_source == "replayed"  # context in the group's tree, trained where the root sampled it
            assert c.prompt_ids == a.prompt_ids
    forest = build_forest([ep.calls for ep in eps])
    alone = sum(build_forest([ep.calls]).num_tokens for ep in eps)
    assert forest.num_tokens < alone  # the replayed prefixes are stored and trained once
    assert not list(tmp_path.iterdir())  # the roots' captures written for the replays are gone
