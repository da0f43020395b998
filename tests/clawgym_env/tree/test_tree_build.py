"""Building trees from calls: exact rebuild, trainable-once, branch kinds, filters, forests."""

from __future__ import annotations

import pytest

from clawgym_env.capture.records import CallRecord
from clawgym_env.errors import TreeError
from clawgym_env.tree import CallRef, TreeFilters, build_forest, build_tree, load_calls
from clawgym_env.tree.synthetic import EpisodeShape, synthetic_episode, synthetic_group

SMALL = EpisodeShape(n_calls=8, system_tokens=120, retry_at=2, subagent_at=3, compaction_at=5)


def call(i: int, prompt: list[int], completion: list[int], session: str = "s", **kw) -> CallRecord:
    return CallRecord(
        session_id=session,
        call_index=i,
        dialect="anthropic",
        prompt_ids=prompt,
        completion_ids=completion,
        logprobs=[-0.1 * (j + 1) for j in range(len(completion))],
        **kw,
    )


@pytest.mark.parametrize("style", ["claude-code", "openclaw"])
def test_rebuilding_paths_gives_back_the_exact_calls(style: str) -> None:
    calls = synthetic_episode(style, shape=SMALL)
    tree = build_tree(calls)
    assert len(tree.calls) == len(calls)
    for c in calls:
        assert tree.call_path(CallRef(c.session_id, c.call_index)) == (c.prompt_ids, c.completion_ids)


def test_sampled_token_reused_as_prompt_is_trainable_once() -> None:
    a = call(0, [1, 2, 3], [7, 8])
    b = call(1, [1, 2, 3, 7, 8, 9], [4])  # extends a: a's completion is b's prompt
    tree = build_tree([a, b])
    assert tree.num_trainable == 3
    assert tree.num_tokens == 7
    assert tree.naive_tokens == 5 + 7
    node = tree.calls[CallRef("s", 0)].end
    # radix nodes do not split at the prompt/completion boundary: flags are per token
    assert node.tokens == [1, 2, 3, 7, 8] and node.sampled == [False, False, False, True, True]
    assert node.logprobs[3:] == pytest.approx([-0.1, -0.2])
    assert node.samplers == {3: [CallRef("s", 0)], 4: [CallRef("s", 0)]}


def test_claude_code_style_is_one_chain_openclaw_style_branches_every_call() -> None:
    shape = EpisodeShape(n_calls=6, system_tokens=100)
    cc = build_tree(synthetic_episode("claude-code", shape=shape))
    oc = build_tree(synthetic_episode("openclaw", shape=shape))
    assert len(cc.leaves()) == 1
    assert len(oc.leaves()) == 6  # every completion hangs under its own volatile message
    assert cc.stats()["naive_over_tree"] > 2.5 and oc.stats()["naive_over_tree"] > 2.0


def test_branch_kinds_from_structure_and_meta_hints() -> None:
    calls = synthetic_episode("claude-code", shape=SMALL)
    tree = build_tree(calls)
    kinds = {r.call_index: (i.kind, i.dead) for r, i in tree.calls.items()}
    assert kinds[2] == ("main", True)  # first attempt: superseded by the resend of its prompt
    assert kinds[3] == ("retry", False)  # same prompt as call 2, and continued
    assert [kinds[i][0] for i in (5, 6, 7)] == ["subagent"] * 3
    assert [k for k, (kind, _) in kinds.items() if kind == "compaction"] == [10]
    assert sum(dead for _, dead in kinds.values()) == 1
    node_kinds = {n.kind for n in tree.nodes()}
    assert {"main", "subagent", "compaction"} <= node_kinds


def test_failed_and_never_continued_calls_are_dead() -> None:
    """Failed; resent (the retry supersedes it); never carried on while its line goes on (compacted away)."""
    summary = list(range(30, 40))
    calls = [
        call(0, [1, 2], [], error="boom", status=500),
        call(1, [1, 2], [4, 5]),  # the resend of call 0's prompt
        call(2, [1, 2, 4, 5, 9], [6, 6]),  # continues call 1; compacted away before anything carried it on
        call(3, [1, 2, 4, 5, 9, 70], summary),  # the summary request, beside call 2
        call(4, [1, 71, *summary, 72], [8]),  # the restart carries the summary: the main line goes on from here
        call(5, [1, 71, *summary, 72, 8, 73], [9]),
    ]
    tree = build_tree(calls)
    got = {r.call_index: (i.kind, i.dead, i.parent) for r, i in tree.calls.items()}
    assert got == {
        0: ("main", True, None),
        1: ("retry", False, 0),
        2: ("main", True, 1),
        3: ("compaction", False, 1),
        4: ("main", False, None),
        5: ("main", False, 4),
    }
    assert "written by call 3" in tree.calls[CallRef("s", 4)].evidence
    pruned = build_tree(calls, filters=TreeFilters(drop_dead=True))
    assert sorted(r.call_index for r in pruned.calls) == [1, 3, 4, 5]
    assert sorted(pruned.dropped["dead"]) == sorted([str(CallRef("s", 0)), str(CallRef("s", 2))])


def test_filters_drop_dead_leaves_and_excluded_kinds_without_touching_the_rest() -> None:
    calls = synthetic_episode("openclaw", shape=SMALL)
    full = build_tree(calls)
    pruned = build_tree(calls, filters=TreeFilters(drop_dead=True, exclude_kinds=frozenset({"subagent", "compaction"})))
    assert len(pruned.calls) == len(full.calls) - 1 - 3 - 1
    assert all(i.kind in ("main", "retry") and not i.dead for i in pruned.calls.values())
    assert len(pruned.leaves()) == len(full.leaves()) - 1 - 1 - 1  # dead leaf, subagent chain, compaction
    for ref in pruned.calls:  # what stays is intact
        assert pruned.call_path(ref) == full.call_path(ref)


def test_max_leaves_drops_whole_episodes() -> None:
    group = [
        synthetic_episode("openclaw", "wide", EpisodeShape(n_calls=6, system_tokens=50), seed=1),
        synthetic_episode("claude-code", "narrow", EpisodeShape(n_calls=6, system_tokens=50), seed=2),
    ]
    forest = build_forest(group)
    assert forest.leaf_counts() == {"wide": 6, "narrow": 1}
    kept = build_forest(group, filters=TreeFilters(max_leaves=3))
    assert kept.episodes == ["narrow"] and kept.dropped["too_many_leaves"] == ["wide"]
    assert {r.episode_id for r in kept.calls} == {"narrow"}


def test_forest_shares_the_group_prompt_and_keeps_rollout_ids() -> None:
    shape = EpisodeShape(n_calls=4, system_tokens=200)
    group = synthetic_group("claude-code", 3, shape)
    forest = build_forest(group)
    singles = [build_tree(ep) for ep in group]
    assert forest.episodes == ["rollout0", "rollout1", "rollout2"]
    shared = len(forest.root.children[next(iter(forest.root.children))])
    assert shared >= 200 + shape.task_tokens  # system + task stored once
    assert forest.num_tokens == sum(t.num_tokens for t in singles) - 2 * shared
    # the first completion token (THINK) follows the same prompt in every rollout: one token, three samplers
    first = forest.root.children[next(iter(forest.root.children))]
    samplers = [refs for n in first.walk() for refs in n.samplers.values() if len(refs) > 1]
    assert samplers and {r.episode_id for r in samplers[0]} == {"rollout0", "rollout1", "rollout2"}
    for ep in group:
        for c in ep:
            assert forest.call_path(CallRef(c.session_id, c.call_index)) == (c.prompt_ids, c.completion_ids)


def test_tokenized_completions_are_not_trainable() -> None:
    a = call(0, [1, 2], [3, 4], token_source="tokenized")
    tree = build_tree([a])
    assert tree.num_trainable == 0 and not tree.calls[CallRef("s", 0)].trainable


def test_calls_without_token_ids_are_reported_and_corrupt_ones_refused() -> None:
    api = CallRecord(session_id="s", call_index=0, dialect="anthropic", completion_text="hi")
    tree = build_tree([api, call(1, [1], [2])])
    assert tree.dropped["no_token_ids"] == [str(CallRef("s", 0))]
    bad = call(2, [1], [2, 3])
    bad.logprobs = [-1.0]
    with pytest.raises(TreeError, match="1 logprobs for 2 completion ids"):
        build_tree([bad])
    with pytest.raises(TreeError, match="appears twice"):
        build_tree([call(1, [1], [2]), call(1, [1], [2])])
    with pytest.raises(TreeError, match="exclude_kinds"):
        TreeFilters(exclude_kinds=frozenset({"tool"}))  # type: ignore[arg-type]


def test_load_calls_reads_capture_jsonl(tmp_path) -> None:
    calls = synthetic_episode("claude-code", shape=EpisodeShape(n_calls=3, system_tokens=20))
    path = tmp_path / "ep.jsonl"
    path.write_text("".join(c.model_dump_json() + "\n" for c in calls))
    loaded = load_calls(path)
    assert [c.prompt_ids for c in loaded] == [c.prompt_ids for c in calls]
    assert build_tree(loaded).num_tokens == build_tree(calls).num_tokens


def test_same_token_sampled_twice_keeps_first_logprob_and_both_samplers() -> None:
    a = call(0, [1, 2], [3], session="a")
    b = call(0, [1, 2], [3], session="b")
    b.logprobs = [-2.0]
    tree = build_forest([[a], [b]])
    node = tree.calls[CallRef("a", 0)].end
    assert tree.num_trainable == 1 and node.logprobs[-1] == pytest.approx(-0.1)
    assert node.samplers[len(node) - 1] == [CallRef("a", 0), CallRef("b", 0)]


def test_branch_hint_by_name_in_meta() -> None:
    calls = [call(0, [1, 2], [3]), call(1, [9, 9], [4], meta={"branch": "compaction"})]
    tree = build_tree(calls)
    assert tree.calls[CallRef("s", 1)].kind == "compaction"


def test_public_surface_is_pinned() -> None:
    import clawgym_env.tree as tree_pkg

    assert tree_pkg.__all__ == sorted(tree_pkg.__all__, key=lambda s: (not s.isupper(), s))
    assert set(tree_pkg.__all__) == {
        "BRANCH_KINDS",
        "TREE_ATTENTION",
        "TREE_FLEX",
        "BranchKind",
        "CallClass",
        "CallInfo",
        "CallRef",
        "NaiveBatch",
        "PackedTree",
        "PrefixTree",
        "TreeBlocks",
        "TreeFilters",
        "TreeNode",
        "build_forest",
        "build_tree",
        "classify_episode",
        "load_calls",
        "pack_naive",
        "pack_tree",
        "pack_trees",
        "register_tree_attention",
        "register_tree_flex",
        "tree_attention",
        "tree_attention_mask",
        "tree_mask_mod",
        "unpack_logprobs",
    }
