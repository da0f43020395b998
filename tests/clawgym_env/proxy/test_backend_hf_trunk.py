"""The HF backend's shared trunk: calls that open with a prefix another session's prompt has keep its keys/values
once (``_hf_shared``), and sample exactly what each call samples alone, with the same logprobs and routing."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM

from clawgym_env.models.testing import tiny_moe_model_path
from clawgym_env.proxy.backends.base import Completion, CompletionRequest
from clawgym_env.proxy.backends.hf import HFBackend


def prompts(vocab: int, shared: int, tails: list[int], seed: int = 0) -> list[list[int]]:
    """One shared opening of ``shared`` ids, then a distinct tail of each length (ids drawn from the vocabulary)."""
    rng = random.Random(seed)
    head = [rng.randrange(5, vocab) for _ in range(shared)]
    return [head + [rng.randrange(5, vocab) for _ in range(n)] for n in tails]


def run(backend: HFBackend, groups: list[list[CompletionRequest]]) -> list[Completion]:
    """Each group of requests concurrently, one group after the other; the backend is closed after."""

    async def go() -> list[Completion]:
        out: list[Completion] = []
        for g in groups:
            out += await asyncio.gather(*(backend.handle(r) for r in g))
        await backend.aclose()
        return out

    return asyncio.run(go())


def request(session: str, ids: list[int], i: int) -> CompletionRequest:
    return CompletionRequest(session, 0, ids, [], max_tokens=10 + i, temperature=1.0, seed=50 + i)


def test_calls_sharing_a_trunk_sample_what_each_samples_alone(tiny_model_dir: Path) -> None:
    """A first call stores its prompt; four more (three that open like it, one that does not) then decode together,
    the three through the trunk. Ids equal and logprobs within 1e-5 of each call alone without any reuse."""
    alone = HFBackend(tiny_model_dir, seed=0, prefix_cache_mb=0.0)
    ps = prompts(alone.tokenizer.vocab_size, 300, [7, 20, 33, 41]) + prompts(alone.tokenizer.vocab_size, 300, [9], seed=1)
    reqs = [request(f"s{i}", p, i) for i, p in enumerate(ps)]
    want = run(alone, [[r] for r in reqs])
    shared = HFBackend(tiny_model_dir, seed=0, prefix_block_tokens=16, min_trunk_tokens=64, max_batch=8)
    got = run(shared, [reqs[:1], reqs[1:]])
    assert shared.stats["trunk_rows"] == 3 and shared.stats["max_rows"] >= 4
    for w, g, r in zip(want, got, reqs, strict=True):
        assert g.completion_ids == w.completion_ids
        assert max(abs(a - b) for a, b in zip(g.logprobs, w.logprobs, strict=True)) < 1e-5
    assert all(g.usage["cached_prompt_tokens"] >= 288 for g in got[1:4])  # the trunk: 300 ids, block-aligned
    assert got[4].usage["cached_prompt_tokens"] == 0


def test_a_row_that_joined_before_the_trunk_adopts_it(tiny_model_dir: Path) -> None:
    """Two sessions arrive together with nothing stored: the first prefills all of its prompt, the second finds the
    first's blocks and forms the trunk, and the first drops its own copy of it; both sample as they do alone. Then
    the first session's next call (its prompt extends the first) reuses trunk and stored completion blocks."""
    alone = HFBackend(tiny_model_dir, seed=0, prefix_cache_mb=0.0)
    ps = prompts(alone.tokenizer.vocab_size, 200, [11, 25])
    first = [request("a", ps[0], 0), request("b", ps[1], 1)]
    want = run(alone, [[r] for r in first])
    shared = HFBackend(tiny_model_dir, seed=0, prefix_block_tokens=16, min_trunk_tokens=64)
    follow_ids = ps[0] + want[0].completion_ids + [7, 8, 9]
    follow = CompletionRequest("a", 1, follow_ids, [], max_tokens=6, temperature=0.0)
    got = run(shared, [first, [follow]])
    assert shared.stats["adopted"] == 1 and shared.stats["trunk_rows"] >= 1
    for w, g in zip(want, got[:2], strict=True):
        assert g.completion_ids == w.completion_ids
        assert max(abs(a - b) for a, b in zip(g.logprobs, w.logprobs, strict=True)) < 1e-5
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    with torch.no_grad():
        logits = model(torch.tensor([follow_ids + got[2].completion_ids])).logits[0]
    ref = torch.log_softmax(logits.float(), -1)[len(follow_ids) - 1 : -1].gather(-1, torch.tensor(got[2].completion_ids)[:, None])
    assert float((ref[:, 0] - torch.tensor(got[2].logprobs)).abs().max()) < 1e-5
    assert logits[len(follow_ids) - 1 : -1].argmax(-1).tolist() == got[2].completion_ids  # greedy
    assert got[2].usage["cached_prompt_tokens"] == (len(ps[0]) + len(want[0].completion_ids) - 1) // 16 * 16  # trunk + own blocks


def test_moe_routing_through_a_trunk_is_that_of_each_calls_own_forward() -> None:
    """Mixture-of-experts calls decoded through a trunk: each call's rows (prompt and every sampled token but the
    last) are the experts a fresh whole forward routes them to, the trunk's rows those stored with it."""
    path = tiny_moe_model_path()
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    backend = HFBackend(path, seed=0, prefix_block_tokens=8, min_trunk_tokens=16, max_batch=4)
    ps = prompts(backend.tokenizer.vocab_size, 48, [5, 9, 14])
    reqs = [request(f"s{i}", p, i) for i, p in enumerate(ps)]
    outs = run(backend, [reqs[:1], reqs[1:]])
    assert backend.stats["trunk_rows"] == 2
    for r, c in zip(reqs, outs, strict=True):
        ids = r.prompt_ids + c.completion_ids
        seen: dict[int, torch.Tensor] = {}
        from clawgym_env.models.moe import moe_routers

        hooks = [x.module.register_forward_hook(lambda m, i, o, layer=x.layer: seen.__setitem__(layer, o[2])) for x in moe_routers(model)]
        with torch.no_grad():
            lp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), -1)
        for h in hooks:
            h.remove()
        experts = torch.stack([seen[k] for k in sorted(seen)], 1).numpy()
        assert c.routing is not None and c.routing.tokens == len(ids) - 1
        assert np.array_equal(np.sort(c.routing.array(), -1), np.sort(experts[: len(ids) - 1], -1))
        want = lp[len(r.prompt_ids) - 1 : -1].gather(-1, torch.tensor(c.completion_ids)[:, None])[:, 0]
        assert float((want - torch.tensor(c.logprobs)).abs().max()) < 1e-5


def test_slot_buffers_grow_with_the_longest_row_not_with_the_row_count() -> None:
    """Adding slots never widens the buffers; a longer row widens them once (by half again), contents kept."""
    from clawgym_env.proxy.backends._hf_shared import SlotCache

    cache = SlotCache(2, "cpu")
    rows = [[(torch.randn(1, 3, 70, 8), torch.randn(1, 3, 70, 8)) for _ in range(2)] for _ in range(10)]
    for i, layers in enumerate(rows):
        cache.put(i, layers)
    assert cache.width() == 70 and cache.pos.tolist() == [70] * 10
    cache.put(10, [(torch.randn(1, 3, 80, 8), torch.randn(1, 3, 80, 8)) for _ in range(2)])
    assert cache.width() == 105
    assert all(torch.equal(cache.slot(i)[j][0], rows[i][j][0]) for i in range(10) for j in range(2))
