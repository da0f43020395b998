"""The HF backend records the experts a MoE model routed every forwarded token to, batched and with reused prefixes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from clawgym_env.capture import read_capture
from clawgym_env.models.moe import moe_routers
from clawgym_env.models.testing import tiny_model_path, tiny_moe_model_path
from clawgym_env.proxy import ProxyServer
from clawgym_env.proxy.backends.base import CompletionRequest
from clawgym_env.proxy.backends.hf import HFBackend


def fresh_routing(model, ids: list[int]) -> tuple[np.ndarray, torch.Tensor]:
    """Experts [tokens, layers, k] and log-softmax of one whole forward of ``ids`` (no cache, no batch)."""
    seen: dict[int, torch.Tensor] = {}
    hooks = [r.module.register_forward_hook(lambda m, i, o, layer=r.layer: seen.__setitem__(layer, o[2])) for r in moe_routers(model)]
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].float()
    for h in hooks:
        h.remove()
    return torch.stack([seen[k] for k in sorted(seen)], 1).numpy(), torch.log_softmax(logits, -1)


@pytest.mark.parametrize("prefix_cache_mb", [0.0, 64.0], ids=["no-prefix-store", "prefix-store"])
def test_routing_of_batched_calls_is_that_of_each_calls_own_forward(prefix_cache_mb: float) -> None:
    """Three calls decoded together, then one that extends the first: each call's rows are its prompt and every
    sampled token but the last, and equal the experts of a fresh whole forward; rows of a prefix reused from the
    store are those stored with it (the call did not recompute them)."""
    path = tiny_moe_model_path()
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    backend = HFBackend(path, seed=0, prefix_cache_mb=prefix_cache_mb, prefix_block_tokens=8, max_batch=4)
    assert backend.routing is not None and backend.routing.num_experts == 4

    async def run() -> list[tuple[CompletionRequest, object]]:
        prompt = list(range(5, 60))
        reqs = [CompletionRequest("s", i, prompt[: 30 + 5 * i], [], max_tokens=10, temperature=1.0) for i in range(3)]
        outs = await asyncio.gather(*[backend.handle(r) for r in reqs])
        follow = CompletionRequest("s", 3, reqs[0].prompt_ids + outs[0].completion_ids + [7, 8, 9], [], max_tokens=10)
        pairs = list(zip(reqs, outs, strict=True)) + [(follow, await backend.handle(follow))]
        await backend.aclose()
        return pairs

    pairs = asyncio.run(run())
    assert backend.stats["max_rows"] >= 2  # decoded together
    if prefix_cache_mb:
        assert pairs[-1][1].usage["cached_prompt_tokens"] >= 32
    for req, c in pairs:
        ids = req.prompt_ids + c.completion_ids
        assert c.routing is not None and c.routing.tokens == len(ids) - 1
        experts, lp = fresh_routing(model, ids)
        assert np.array_equal(np.sort(c.routing.array(), -1), np.sort(experts[: len(ids) - 1], -1))
        want = lp[len(req.prompt_ids) - 1 : -1].gather(-1, torch.tensor(c.completion_ids)[:, None])[:, 0]
        assert float((want - torch.tensor(c.logprobs)).abs().max()) < 1e-5


def test_stored_prefix_rows_are_reused_not_recomputed() -> None:
    """A prompt that reuses stored blocks starts with the rows stored with them, whatever the store holds."""
    backend = HFBackend(tiny_moe_model_path(), seed=0, prefix_cache_mb=64.0, prefix_block_tokens=8)

    async def run() -> tuple[object, object]:
        first = await backend.handle(CompletionRequest("s", 0, list(range(5, 30)), [], max_tokens=2))
        for blk in backend.prefix._blocks.values():  # mark the stored rows: a reuse must carry the mark
            blk.routing = np.full_like(blk.routing, 3)
        second = await backend.handle(CompletionRequest("s", 1, list(range(5, 30)) + [40, 41], [], max_tokens=2))
        await backend.aclose()
        return first, second

    first, second = asyncio.run(run())
    assert second.usage["cached_prompt_tokens"] == 24
    rows = second.routing.array()
    assert (rows[:24] == 3).all() and not (rows[24:] == 3).all()


def test_a_dense_model_returns_no_routing() -> None:
    backend = HFBackend(tiny_model_path(), seed=0)
    assert backend.routing is None

    async def run() -> object:
        out = await backend.handle(CompletionRequest("s", 0, [5, 6, 7], [], max_tokens=3))
        await backend.aclose()
        return out

    assert asyncio.run(run()).routing is None


async def test_proxy_capture_holds_the_routing_with_references(server: ProxyServer, tmp_path: Path) -> None:
    """SDK -> proxy -> HF backend (tiny MoE) -> capture file: the second call's line references the rows the
    first call holds, and the file reads back to each call's whole routing."""
    import anthropic

    backend = HFBackend(tiny_moe_model_path(), seed=3)
    sess = server.open_session(backend, capture_path=tmp_path / "ep.jsonl", sampling={"max_tokens": 8})
    client = anthropic.AsyncAnthropic(base_url=server.url, api_key=sess.api_key, max_retries=0)
    history: list[dict] = [{"role": "user", "content": "list the files please"}]
    for turn in range(2):
        final = await client.messages.create(model="m", max_tokens=4096, system="agent", messages=history)
        history.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in final.content]})
        history.append({"role": "user", "content": f"go on {turn}"})
    first, second = await server.close_session(sess.session_id)
    await backend.aclose()
    assert first.routing.tokens == len(first.prompt_ids) + len(first.completion_ids) - 1
    assert second.routing.tokens == len(second.prompt_ids) + len(second.completion_ids) - 1
    back = read_capture(tmp_path / "ep.jsonl")
    assert [r.routing for r in back] == [first.routing, second.routing]
    line = (tmp_path / "ep.jsonl").read_bytes().splitlines()[1]
    assert b'"routing":[0,' in line  # the shared rows are a reference to call 0
