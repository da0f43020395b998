"""HFBackend: exact logprobs, batch-invariant sampling, stops, weight updates, clear errors."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from clawgym_env.errors import ConfigError, PolicyBackendError
from clawgym_env.models.smollm2 import default_model_path
from clawgym_env.models.tiny import build_tiny_model
from clawgym_env.proxy.backends.base import CompletionRequest
from clawgym_env.proxy.backends.hf import HFBackend


@pytest.fixture(scope="module")
def backend(tiny_model_dir: Path) -> Iterator[HFBackend]:
    b = HFBackend(tiny_model_dir, seed=1)
    yield b
    asyncio.run(b.aclose())


def prompt(b: HFBackend, text: str = "list the files please") -> list[int]:
    rendered = b.tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False)
    return b.tokenizer.encode(rendered, add_special_tokens=False)


def req(ids: list[int], **kw) -> CompletionRequest:
    return CompletionRequest(session_id="s", call_index=0, prompt_ids=ids, messages=[], **kw)


def forward_logprobs(model, ids: list[int], completion: list[int], temperature: float = 1.0) -> list[float]:
    with torch.no_grad():
        logits = model(torch.tensor([ids + completion])).logits[0].float()
    lp = torch.log_softmax(logits / temperature, dim=-1)
    return [lp[len(ids) - 1 + i, t].item() for i, t in enumerate(completion)]


async def test_logprobs_match_a_separate_forward_pass(backend: HFBackend, tiny_model_dir: Path) -> None:
    ids = prompt(backend)
    out = await backend.handle(req(ids, max_tokens=24, temperature=0.7, top_p=0.9, seed=5))
    assert out.finish_reason == "length" and len(out.completion_ids) == 24 == len(out.logprobs)
    assert out.usage == {"prompt_tokens": len(ids), "completion_tokens": 24, "cached_prompt_tokens": 0}
    fresh = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()  # an independent copy of the policy
    ref = forward_logprobs(fresh, ids, out.completion_ids)
    assert max(abs(a - b) for a, b in zip(ref, out.logprobs, strict=True)) < 1e-4
    assert out.text == backend.tokenizer.decode(out.completion_ids, skip_special_tokens=True)


async def test_tempered_logprobs_mode(tiny_model_dir: Path) -> None:
    b = HFBackend(tiny_model_dir, logprobs_mode="tempered")
    try:
        ids = prompt(b)
        out = await b.handle(req(ids, max_tokens=8, temperature=0.5, seed=2))
        ref = forward_logprobs(b.model, ids, out.completion_ids, temperature=0.5)
        assert max(abs(a - b) for a, b in zip(ref, out.logprobs, strict=True)) < 1e-4
    finally:
        await b.aclose()


async def test_concurrent_requests_batch_and_match_running_alone(backend: HFBackend) -> None:
    ids = prompt(backend, "write a python script that counts lines in data.json")
    reqs = [req(ids[: len(ids) - 4 * i], max_tokens=12 + 3 * i, temperature=0.0 if i % 2 == 0 else 1.0, seed=100 + i) for i in range(4)]
    alone = [await backend.handle(r) for r in reqs]
    before = dict(backend.stats)
    together = await asyncio.gather(*(backend.handle(r) for r in reqs))
    assert backend.stats["joins"] - before["joins"] >= 2  # they really shared the running batch
    assert backend.stats["max_rows"] >= 3
    for a, t in zip(alone, together, strict=True):
        assert a.completion_ids == t.completion_ids
        assert max(abs(x - y) for x, y in zip(a.logprobs, t.logprobs, strict=True)) < 1e-4
    assert [len(a.completion_ids) for a in alone] == [12, 15, 18, 21]


async def test_seeds_control_sampling(backend: HFBackend) -> None:
    ids = prompt(backend)
    a = await backend.handle(req(ids, max_tokens=16, seed=7))
    b = await backend.handle(req(ids, max_tokens=16, seed=7))
    c = await backend.handle(req(ids, max_tokens=16, seed=8))
    assert a.completion_ids == b.completion_ids != c.completion_ids


async def test_top_p_restricts_to_the_nucleus(backend: HFBackend) -> None:
    ids = prompt(backend)
    for seed in range(5):
        out = await backend.handle(req(ids, max_tokens=1, top_p=1e-6 if seed % 2 else 0.0, seed=seed))  # nucleus = argmax
        greedy = await backend.handle(req(ids, max_tokens=1, temperature=0.0))
        assert out.completion_ids == greedy.completion_ids


async def test_stop_string_and_eos_end_the_completion(backend: HFBackend, tiny_model_dir: Path) -> None:
    ids = prompt(backend)
    base = await backend.handle(req(ids, max_tokens=20, seed=11))
    stop = base.text[5:8]
    assert stop
    cut = await backend.handle(req(ids, max_tokens=20, seed=11, stop=[stop]))
    assert cut.finish_reason == "stop"
    assert base.completion_ids[: len(cut.completion_ids)] == cut.completion_ids
    assert len(cut.completion_ids) < 20
    assert stop not in cut.text and base.text.startswith(cut.text)

    first = base.completion_ids[0]
    eos_backend = HFBackend(tiny_model_dir, eos_token_ids=[first])
    try:
        out = await eos_backend.handle(req(ids, max_tokens=20, seed=11))
        assert out.completion_ids == [first] and out.finish_reason == "stop"  # the EOS id is kept: it is trained on
    finally:
        await eos_backend.aclose()


async def test_update_weights_changes_policy_and_version(tiny_model_dir: Path, tmp_path: Path) -> None:
    b = HFBackend(tiny_model_dir)
    try:
        ids = prompt(b)
        before = await b.handle(req(ids, max_tokens=10, temperature=0.0))
        assert before.policy_version == 0
        other = AutoModelForCausalLM.from_pretrained(build_tiny_model(tmp_path, seed=9))
        b.update_weights(other.state_dict(), version=3)
        after = await b.handle(req(ids, max_tokens=10, temperature=0.0))
        assert after.policy_version == 3
        assert after.logprobs != before.logprobs
        ref = forward_logprobs(other, ids, after.completion_ids)
        assert max(abs(x - y) for x, y in zip(ref, after.logprobs, strict=True)) < 1e-4
        with pytest.raises(PolicyBackendError, match="does not fit"):
            b.update_weights({"nope": torch.zeros(1)}, version=4)
        assert b.policy_version == 3
    finally:
        await b.aclose()


def call(sid: str, ids: list[int], seed: int, max_tokens: int = 8) -> CompletionRequest:
    return CompletionRequest(
        session_id=sid, call_index=0, prompt_ids=ids, messages=[], max_tokens=max_tokens, temperature=0.0 if seed == 0 else 1.0, seed=seed
    )


def chat(b: HFBackend, system: str, user: str) -> list[int]:
    text = b.tokenizer.apply_chat_template(
        [{"role": "system", "content": system}, {"role": "user", "content": user}], add_generation_prompt=True, tokenize=False
    )
    return b.tokenizer.encode(text, add_special_tokens=False)


def close(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and max(abs(x - y) for x, y in zip(a, b, strict=True)) < 1e-4


SYSTEM = "You are a coding agent in a sandbox. " + " ".join(f"Rule {i}: read a file before you edit it." for i in range(12))


async def test_prefix_cache_extends_a_session_exactly(tiny_model_dir: Path) -> None:
    """An agent's next call extends its last one: only the new tokens (and the last partial block) are prefilled."""
    cached, plain = HFBackend(tiny_model_dir, prefix_block_tokens=8), HFBackend(tiny_model_dir, prefix_cache_mb=0)
    try:
        ids = prompt(cached)
        first = await cached.handle(call("ep1", ids, 1))
        follow = ids + first.completion_ids + cached.tokenizer.encode("<|im_end|>\n<|im_start|>user\nok go on<|im_end|>\n")
        # the 1st time: the blocks of call 1's prompt + completion; the 2nd: this very prompt's, stored on its prefill
        for seed, reused in ((0, (len(ids) + len(first.completion_ids) - 1) // 8 * 8), (2, (len(follow) - 1) // 8 * 8)):
            second = await cached.handle(call("ep1", follow, seed))
            reference = await plain.handle(call("ep1", follow, seed))
            assert second.usage["cached_prompt_tokens"] == reused
            assert reference.usage["cached_prompt_tokens"] == 0
            assert second.completion_ids == reference.completion_ids and close(second.logprobs, reference.logprobs)
            assert close(forward_logprobs(cached.model, follow, second.completion_ids), second.logprobs)
        cached.update_weights(cached.model.state_dict(), version=1)  # new weights: stored keys/values are stale
        assert len(cached.prefix) == 0
        assert (await cached.handle(call("ep1", follow, 3))).usage["cached_prompt_tokens"] == 0
    finally:
        await cached.aclose()
        await plain.aclose()


async def test_prefix_cache_is_shared_across_sessions_and_bounded(tiny_model_dir: Path) -> None:
    """A new episode reuses the system prompt another episode left; same logprobs as no reuse; memory stays in budget."""
    cached, plain = HFBackend(tiny_model_dir, prefix_block_tokens=16), HFBackend(tiny_model_dir, prefix_cache_mb=0)
    try:
        a, b = chat(cached, SYSTEM, "list the files"), chat(cached, SYSTEM, "fix the failing test please")
        common = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
        assert common > 64
        await cached.handle(call("ep-a", a, 1))
        for seed in (0, 5):
            out = await cached.handle(call("ep-b", b, seed, max_tokens=12))
            ref = await plain.handle(call("ep-b", b, seed, max_tokens=12))
            assert out.usage["cached_prompt_tokens"] == common // 16 * 16
            assert out.completion_ids == ref.completion_ids and close(out.logprobs, ref.logprobs)
        # concurrent first calls: the first row's prompt blocks serve the rows prefilled after it
        longer = SYSTEM + " Keep every answer brief, cite the file and the line you changed, then stop and wait."
        c, d = chat(cached, longer, "go"), chat(cached, longer, "stop")
        outs = await asyncio.gather(*(cached.handle(call(f"ep-{i}", p, 7)) for i, p in enumerate((c, d))))
        with_a, with_c = (next(i for i, (x, y) in enumerate(zip(p, q)) if x != y) // 16 * 16 for p, q in ((a, c), (c, d)))
        assert with_c > with_a
        assert sorted(o.usage["cached_prompt_tokens"] for o in outs) == [with_a, with_c]
        # bounded: a budget of a few blocks evicts, never exceeds
        per_block = next(iter(cached.prefix._blocks.values())).nbytes
        small = HFBackend(tiny_model_dir, prefix_block_tokens=16, prefix_cache_mb=3.5 * per_block / 2**20)
        try:
            for i, p in enumerate((a, b, c)):
                await small.handle(call(f"s{i}", p, 1))
                assert 0 < small.prefix.bytes <= small.prefix.budget and len(small.prefix) <= 3
            out = await small.handle(call("s9", a, 0))
            ref = await plain.handle(call("s9", a, 0))
            assert out.completion_ids == ref.completion_ids and close(out.logprobs, ref.logprobs)
        finally:
            await small.aclose()
    finally:
        await cached.aclose()
        await plain.aclose()


async def test_a_cancelled_call_stops_decoding(tiny_model_dir: Path) -> None:
    """A harness that hangs up must not keep the worker busy until max_tokens."""
    b = HFBackend(tiny_model_dir, eos_token_ids=[])  # no EOS: only max_tokens or cancellation ends it
    try:
        ids = prompt(b)
        long_call = asyncio.create_task(b.handle(req(ids, max_tokens=30000, seed=0)))
        await asyncio.sleep(0.3)
        long_call.cancel()
        out = await asyncio.wait_for(b.handle(req(ids, max_tokens=2)), timeout=15)  # uncancelled: > 50 s
        assert len(out.completion_ids) == 2
        assert long_call.cancelled()
    finally:
        await b.aclose()


async def test_bad_requests_and_lifecycle(tiny_model_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config.json"):
        HFBackend(tmp_path)
    with pytest.raises(ConfigError, match="not a torch dtype"):
        HFBackend(tiny_model_dir, dtype="float33")
    b = HFBackend(tiny_model_dir)
    with pytest.raises(PolicyBackendError, match="prompt_ids"):
        await b.handle(req([]))
    with pytest.raises(PolicyBackendError, match="outside the vocabulary"):
        await b.handle(req([1, 10**7]))
    ok = await b.handle(req(prompt(b), max_tokens=2))
    # max_tokens bounds the completion; a random tiny model may also end it early with EOS
    assert len(ok.completion_ids) == 2 or (ok.completion_ids[-1] in b.eos_token_ids and ok.finish_reason == "stop")
    assert ok.finish_reason == ("length" if ok.completion_ids[-1] not in b.eos_token_ids else "stop")
    await b.aclose()
    await b.aclose()  # idempotent
    with pytest.raises(PolicyBackendError, match="closed"):
        await b.handle(req(prompt(b), max_tokens=2))


async def test_smollm2_answers_through_the_backend_with_exact_logprobs() -> None:
    b = HFBackend(default_model_path(), max_batch=2, prefix_block_tokens=16)
    plain = HFBackend(default_model_path(), prefix_cache_mb=0)
    try:
        ids = prompt(b, "What is the capital of France? Answer in one word.")
        out = await b.handle(req(ids, max_tokens=8, temperature=0.0))
        assert "Paris" in out.text
        ref = forward_logprobs(b.model, ids, out.completion_ids)
        assert max(abs(x - y) for x, y in zip(ref, out.logprobs, strict=True)) < 1e-4
        # another session with the same system prompt reuses its blocks, with the logprobs of a full prefill
        a, c = chat(b, SYSTEM, "Name a prime number."), chat(b, SYSTEM, "What is the capital of Italy?")
        await b.handle(call("x", a, 0))
        reused, full = await b.handle(call("y", c, 3)), await plain.handle(call("y", c, 3))
        assert reused.usage["cached_prompt_tokens"] >= 64 and full.usage["cached_prompt_tokens"] == 0
        assert reused.completion_ids == full.completion_ids and close(reused.logprobs, full.logprobs)
    finally:
        await b.aclose()
        await plain.aclose()
