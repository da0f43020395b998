"""Routing on prefix trees: a shared node keeps the routing its calls agree on, and splits where they do not."""

from __future__ import annotations

import numpy as np
import torch

from clawgym_env.capture import CallRecord, RoutedExperts
from clawgym_env.tree import CallRef, build_forest, pack_naive, pack_tree, pack_trees
from clawgym_env.tree.routing import route_tree

RNG = np.random.default_rng(1)
PROMPT = list(range(10, 50))


def rec(ep: str, i: int, prompt: list[int], completion: list[int], rows: np.ndarray | None) -> CallRecord:
    return CallRecord(
        session_id=ep,
        call_index=i,
        dialect="anthropic",
        prompt_ids=prompt,
        completion_ids=completion,
        logprobs=[-0.1 * (j + 1) - (0.01 if ep == "b" else 0.0) for j in range(len(completion))],
        routing=None if rows is None else RoutedExperts.from_array(rows, 8),
    )


def random_rows(n: int) -> np.ndarray:
    """[n, 2 layers, top-2] distinct experts of 8, in random order (the tree compares them as sets)."""
    return np.stack([np.stack([RNG.choice(8, 2, replace=False) for _ in range(2)]) for _ in range(n)])


def group(disagree_at: int | None) -> tuple[list[list[CallRecord]], np.ndarray]:
    """Two episodes of two calls sharing the prompt; episode b routed prompt position ``disagree_at`` otherwise."""
    shared = random_rows(len(PROMPT) + 10)
    eps = []
    for ep, comp in (("a", [60, 61, 62]), ("b", [60, 63, 64])):
        rows0 = shared[: len(PROMPT) + 2].copy()
        rows0[len(PROMPT) + 1 :] = random_rows(1)  # the second sampled token differs between the episodes
        if ep == "b" and disagree_at is not None:
            rows0[disagree_at] = (rows0[disagree_at] + 1) % 8
        first = rec(ep, 0, PROMPT, comp, rows0)
        p1 = PROMPT + comp + [70, 71]
        rows1 = np.concatenate([rows0, random_rows(len(p1) + 2 - 1 - len(rows0))])
        eps.append([first, rec(ep, 1, p1, [80, 81], rows1)])
    return eps, shared


def path_rows(tree, ref: CallRef) -> np.ndarray:
    node = tree.calls[ref].end
    return np.concatenate([n.routing for n in [*node.ancestors(), node] if not n.is_root])


def test_agreeing_calls_share_every_node_with_their_routing() -> None:
    eps, _ = group(None)
    tree = build_forest(eps)
    routed, split = route_tree(tree, [c for ep in eps for c in ep])
    assert split.disagreeing_tokens == 0 and split.split_nodes == 0 and split.extra_tokens == 0
    # the prompt and the first sampled token (60), forwarded by all four calls; each episode's second token by its two
    assert split.shared_tokens == len(PROMPT) + 1 + 2
    assert routed.num_tokens == tree.num_tokens and routed is not tree
    for ep in eps:
        for c in ep:
            ref = CallRef(c.session_id, c.call_index)
            got = path_rows(routed, ref)
            want = np.sort(c.routing.array(), -1)
            assert np.array_equal(got[: len(want)], want)
            assert (got[len(want) :] == -1).all() or len(got) == len(want) + 1  # the last token: no forward, free or routed by a later call
    pk = pack_tree(routed)
    assert pk.routing is not None and pk.routing.shape == (len(pk), 2, 2)
    assert torch.equal(pk.loss_mask, pack_tree(tree).loss_mask)


def test_a_disagreement_splits_the_node_and_each_call_keeps_its_own_routing() -> None:
    eps, _ = group(disagree_at=25)
    tree = build_forest(eps)
    calls = [c for ep in eps for c in ep]
    routed, split = route_tree(tree, calls)
    assert split.disagreeing_tokens == 1 and split.split_nodes == 1
    assert split.extra_tokens == len(PROMPT) - 25 + 1  # the prompt's tail and the shared first token, once more
    for c in calls:
        ref = CallRef(c.session_id, c.call_index)
        want = np.sort(c.routing.array(), -1)
        assert np.array_equal(path_rows(routed, ref)[: len(want)], want)
        prompt, completion = routed.call_path(ref)
        assert prompt == c.prompt_ids and completion == c.completion_ids
    a, b = routed.calls[CallRef("a", 0)].end, routed.calls[CallRef("b", 0)].end
    assert a.ancestors()[1] is b.ancestors()[1] and len(a.ancestors()[1]) == 25  # the head stays shared
    # every (token, rollout) pair once, each with its own rollout logprob: token 60 was sampled by both, now twice
    pk, before = pack_tree(routed), pack_tree(tree)
    assert len(pk.sampler_token) == len(before.sampler_token)
    assert pk.num_loss_tokens == before.num_loss_tokens + 1
    first = pk.loss_mask.nonzero()[:, 0]
    want = torch.tensor(sorted(lp for c in calls for lp in c.logprobs))
    assert torch.allclose(pk.rollout_logprobs[first].sort().values, want)  # b's own logprob of token 60, not a's


def test_calls_without_routing_leave_their_tokens_free_and_join_the_others() -> None:
    eps, _ = group(None)
    eps[1] = [c.model_copy(update={"routing": None}) for c in eps[1]]
    tree = build_forest(eps)
    routed, split = route_tree(tree, [c for ep in eps for c in ep])
    assert split.split_nodes == 0 and routed.num_tokens == tree.num_tokens
    b_tail = routed.calls[CallRef("b", 1)].end
    assert (b_tail.routing == -1).all()  # only episode b forwarded it, without a record: the trainer routes it
    assert not (path_rows(routed, CallRef("b", 0))[: len(PROMPT)] == -1).any()  # episode a routed the shared prompt


def test_no_routing_at_all_returns_the_tree_itself() -> None:
    eps, _ = group(None)
    plain = [[c.model_copy(update={"routing": None}) for c in ep] for ep in eps]
    tree = build_forest(plain)
    routed, split = route_tree(tree, [c for ep in plain for c in ep])
    assert routed is tree and split.shared_tokens == 0 and pack_tree(tree).routing is None


def test_split_packs_and_the_per_call_layout_carry_the_same_routing() -> None:
    eps, _ = group(disagree_at=5)
    routed, _ = route_tree(build_forest(eps), [c for ep in eps for c in ep])
    whole = pack_tree(routed)
    by_call = {}
    for pk in pack_trees(routed, max_tokens=routed.max_depth):
        assert pk.routing is not None and len(pk.routing) == len(pk)
        for ref, idx in pk.call_tokens.items():
            by_call[ref] = pk.routing[idx]
    naive = pack_naive(routed)
    for i, ref in enumerate(naive.refs):
        row = naive.routing[i]
        assert row.shape[0] == naive.rows[i].shape[0]
        assert torch.equal(by_call[ref], row[naive.prompt_lens[i] :])
        assert torch.equal(whole.routing[whole.call_tokens[ref]], row[naive.prompt_lens[i] :])
    padded = whole.padded(64)
    assert (padded.routing[len(whole) :] == -1).all() and float(padded.call_counts[len(whole) :].sum()) == 0
    # call multiplicity: the shared head is on the path of all 4 calls, each call's own tail of 1
    assert float(whole.call_counts[0]) == 4 and float(whole.call_counts.sum()) == sum(len(r) for r in naive.rows)
