"""HFBackend continuous batching and token streaming: calls join and leave the running batch per step,
a seeded call samples the same alone or batched, and streamed deltas add up to the completion."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from clawgym_env.errors import PolicyBackendError
from clawgym_env.proxy.backends.base import Completion, CompletionDelta, CompletionRequest
from clawgym_env.proxy.backends.hf import HFBackend


@pytest.fixture
async def backend(tiny_model_dir: Path) -> AsyncIterator[HFBackend]:
    b = HFBackend(tiny_model_dir, eos_token_ids=[], prefix_cache_mb=0)  # no EOS: max_tokens or a stop ends a call
    yield b
    await b.aclose()


def ids_of(b: HFBackend, text: str) -> list[int]:
    rendered = b.tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False)
    return b.tokenizer.encode(rendered, add_special_tokens=False)


def req(ids: list[int], seed: int, max_tokens: int, **kw) -> CompletionRequest:
    return CompletionRequest(session_id=f"s{seed}", call_index=0, prompt_ids=ids, messages=[], max_tokens=max_tokens, seed=seed, **kw)


def same(a: Completion, b: Completion) -> bool:
    assert a.logprobs is not None and b.logprobs is not None
    return (
        a.completion_ids == b.completion_ids
        and a.text == b.text
        and a.finish_reason == b.finish_reason
        and max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < 1e-4
    )


async def test_calls_join_and_leave_the_running_batch(backend: HFBackend) -> None:
    """A short call sent while a long one decodes joins it and returns first; both sample as they do alone."""
    long_req = req(ids_of(backend, "write a long story about a fox"), 1, 80, temperature=0.9, top_p=0.95)
    short_reqs = [
        req(ids_of(backend, f"list {w} files"), 2 + i, 6 + 3 * i, temperature=t)
        for i, (w, t) in enumerate((("three", 0.0), ("the python", 1.3), ("all", 0.7)))
    ]
    alone = [await backend.handle(r) for r in (long_req, *short_reqs)]
    before = dict(backend.stats)
    order: list[str] = []

    async def run(name: str, r: CompletionRequest) -> Completion:
        out = await backend.handle(r)
        order.append(name)
        return out

    long_task = asyncio.create_task(run("long", long_req))
    while backend.stats["steps"] - before["steps"] < 5:  # the long call is decoding
        await asyncio.sleep(0.01)
    shorts = await asyncio.gather(*(run(f"short{i}", r) for i, r in enumerate(short_reqs)))
    assert "long" not in order  # the short calls left the batch while the long one went on
    long_out = await long_task
    assert backend.stats["joins"] - before["joins"] >= 3  # each short call joined rows already decoding
    assert backend.stats["max_rows"] >= 2
    assert backend.stats["steps"] - before["steps"] < sum(len(o.completion_ids or []) for o in alone)  # steps were shared
    for a, t in zip(alone, [long_out, *shorts], strict=True):
        assert same(a, t)


async def test_stream_yields_deltas_before_the_end_that_add_up_to_handle(backend: HFBackend) -> None:
    ids = ids_of(backend, "explain what the tests check")
    whole = await backend.handle(req(ids, 4, 40))
    stop = (whole.text or "")[20:23]
    assert stop
    for r in (req(ids, 4, 40), req(ids, 4, 40, stop=[stop])):
        plain = await backend.handle(r)
        items: list[CompletionDelta | Completion] = []
        steps_at: list[int] = []
        async for item in backend.stream(r):
            items.append(item)
            steps_at.append(backend.stats["steps"])
        final = items[-1]
        assert isinstance(final, Completion) and same(final, plain)
        deltas = [d for d in items[:-1] if isinstance(d, CompletionDelta)]
        assert len(deltas) == len(items) - 1 == len(plain.completion_ids or []) >= 4  # one per step (text may lag)
        assert sum((d.completion_ids for d in deltas), []) == plain.completion_ids
        assert sum((d.logprobs for d in deltas), []) == plain.logprobs
        assert "".join(d.text for d in deltas) == plain.text
        assert steps_at[0] < steps_at[-2]  # the first delta came while decoding went on
    assert stop not in (plain.text or "") and plain.finish_reason == "stop"


async def test_an_abandoned_stream_stops_its_row(backend: HFBackend) -> None:
    ids = ids_of(backend, "count to a million")
    gen = backend.stream(req(ids, 5, 30000))
    first = await anext(gen)
    assert isinstance(first, CompletionDelta) and len(first.completion_ids) >= 1
    await gen.aclose()
    out = await asyncio.wait_for(backend.handle(req(ids, 6, 3)), timeout=15)  # the worker is free again
    assert len(out.completion_ids or []) == 3


async def test_a_weight_update_waits_for_running_rows_and_holds_new_calls(backend: HFBackend, tiny_model_dir: Path, tmp_path: Path) -> None:
    """Rows running when new weights arrive finish under the old ones (and say so); calls after get the new."""
    from transformers import AutoModelForCausalLM

    from clawgym_env.models.tiny import build_tiny_model

    other = AutoModelForCausalLM.from_pretrained(build_tiny_model(tmp_path, seed=9))
    ids = ids_of(backend, "keep writing")
    old_alone = await backend.handle(req(ids, 7, 40))
    running = asyncio.create_task(backend.handle(req(ids, 7, 40)))
    while backend.stats["steps"] < 45:  # 39 steps for the first call, then the second is decoding
        await asyncio.sleep(0.01)
    update = asyncio.create_task(asyncio.to_thread(backend.update_weights, other.state_dict(), 1))
    await asyncio.sleep(0.05)
    later = asyncio.create_task(backend.handle(req(ids, 8, 5)))
    old = await running
    await update
    new = await later
    assert old.policy_version == 0 and same(old, old_alone)  # not a mix of two policies
    assert new.policy_version == 1


async def test_a_call_that_fails_leaves_the_batch_alone(backend: HFBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows share one batch across episodes, so what one call does must fail that call only. A seed past
    64 bits once failed every row decoding beside it (PolicyBackendError: an infrastructure error for each
    of those episodes) and hung the call itself; the dialects now refuse it (400), and the backend fails it alone."""
    victim = req(ids_of(backend, "write a long story about a fox"), 1, 40, temperature=1.0)
    alone = await backend.handle(victim)
    running = asyncio.create_task(backend.handle(victim))
    while not backend._batcher.busy:
        await asyncio.sleep(0.005)
    bad = req(ids_of(backend, "hi"), 1 << 70, 8, temperature=1.0)
    with pytest.raises(PolicyBackendError, match="Overflow"):
        await asyncio.wait_for(backend.handle(bad), 30)
    assert same(await running, alone)

    # a row whose sampling raises mid-decode leaves; the row beside it decodes on, as it would alone
    from clawgym_env.proxy.backends import _hf_row

    step = _hf_row.Row.step

    def fragile(self: _hf_row.Row, logits):  # a fault in one row's sampling, after its first few tokens
        if self.request.session_id == "s7" and len(self.ids) == 3:
            raise RuntimeError("this row's sampling failed")
        return step(self, logits)

    monkeypatch.setattr(_hf_row.Row, "step", fragile)
    both = await asyncio.gather(
        backend.handle(victim), backend.handle(req(ids_of(backend, "hi"), 7, 20, temperature=1.0)), return_exceptions=True
    )
    assert same(both[0], alone)
    assert isinstance(both[1], PolicyBackendError) and "this row's sampling failed" in str(both[1])
