"""The real token-level path: SDK -> proxy -> HFBackend (tiny Qwen3 model) -> capture, with exact ids."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from clawgym_env.capture import read_capture
from clawgym_env.models.testing import tiny_model_path
from clawgym_env.proxy import ProxyServer

from .conftest import WRITE_TOOL_ANTHROPIC


@pytest.fixture(scope="module")
def hf_backend():
    import asyncio

    from clawgym_env.proxy.backends.hf import HFBackend

    b = HFBackend(tiny_model_path(), seed=3)
    yield b
    asyncio.run(b.aclose())


async def test_sampled_ids_logprobs_and_prefix_extension(server: ProxyServer, hf_backend, tmp_path) -> None:
    import anthropic

    sess = server.open_session(hf_backend, capture_path=tmp_path / "ep.jsonl", sampling={"max_tokens": 12})
    c = anthropic.AsyncAnthropic(base_url=server.url, api_key=sess.api_key, max_retries=0)
    history: list[dict] = [{"role": "user", "content": "list the files please"}]
    for turn in range(2):
        async with c.messages.stream(model="m", max_tokens=4096, system="agent", messages=history, tools=[WRITE_TOOL_ANTHROPIC]) as s:
            final = await s.get_final_message()  # random weights: whatever it says must parse in the SDK
        history.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in final.content]})
        history.append({"role": "user", "content": f"go on {turn}"})
    first, second = await server.close_session(sess.session_id)
    assert first.token_source == "sampled" and len(first.completion_ids) == len(first.logprobs) <= 12
    head = first.prompt_ids + first.completion_ids
    assert second.prompt_ids[: len(head)] == head and second.reused_prompt_tokens >= len(head)
    # the captured logprobs are those of the model on the captured ids (a separate forward pass)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path()).eval()
    with torch.no_grad():
        logits = model(torch.tensor([head])).logits[0].float()
    lp = torch.log_softmax(logits, dim=-1)
    n = len(first.prompt_ids)
    ref = [lp[n - 1 + i, t].item() for i, t in enumerate(first.completion_ids)]
    assert max(abs(a - b) for a, b in zip(ref, first.logprobs, strict=True)) < 1e-4
    assert read_capture(tmp_path / "ep.jsonl")[1].prompt_ids == second.prompt_ids


LONG = "file " * 40_000  # > 32,768 tiny-tokenizer tokens: past the tiny model's positions


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_a_prompt_past_the_context_is_the_requests_error(server: ProxyServer, hf_backend, tmp_path, stream: bool) -> None:
    """A history grown past the policy's context is what the policy's own tool calls did: 400, as the APIs
    answer it (Anthropic's words), never a 5xx, which makes the episode an infrastructure error that
    training always leaves out (so ``cat`` of a big file would have been a way out of a failing grade)."""
    import anthropic
    import openai

    sess = server.open_session(hf_backend, capture_path=tmp_path / "ep.jsonl", sampling={"max_tokens": 8})
    a = anthropic.AsyncAnthropic(base_url=server.url, api_key=sess.api_key, max_retries=0)
    o = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key=sess.api_key, max_retries=0)
    with pytest.raises(anthropic.BadRequestError, match=r"prompt is too long: \d+ tokens > 32767 maximum"):
        await a.messages.create(model="m", max_tokens=8, messages=[{"role": "user", "content": LONG}], stream=stream)
    with pytest.raises(openai.BadRequestError, match="prompt is too long"):
        await o.chat.completions.create(model="m", max_tokens=8, messages=[{"role": "user", "content": LONG}], stream=stream)
    await a.messages.create(model="m", max_tokens=8, messages=[{"role": "user", "content": "hi"}])  # the session goes on
    calls = await server.close_session(sess.session_id)
    assert [c.status for c in calls] == [400, 400, 200] and all(c.completion_ids is None for c in calls[:2])
    assert len(calls[0].prompt_ids) > 32_767 and "prompt is too long" in calls[0].error


async def test_a_conversation_the_chat_template_rejects_is_the_requests_error(server: ProxyServer, tmp_path) -> None:
    """The agent holds its episode's proxy key (the harness's env), so it can send the proxy a conversation
    of its own; one the policy's template refuses (Qwen3's and others raise) is a 400, like count_tokens'."""
    import shutil

    import openai
    from transformers import AutoTokenizer

    from clawgym_env.proxy.backends.hf import HFBackend

    model = tmp_path / "strict"
    shutil.copytree(tiny_model_path(), model)
    tok = AutoTokenizer.from_pretrained(model)
    tok.chat_template = (
        "{% if messages[0]['role'] == 'assistant' %}{{ raise_exception('Conversations start with a user "
        "or system message.') }}{% endif %}" + tok.chat_template
    )
    tok.save_pretrained(model)
    backend = HFBackend(model, seed=0)
    try:
        sess = server.open_session(backend, sampling={"max_tokens": 4})
        o = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key=sess.api_key, max_retries=0)
        with pytest.raises(openai.BadRequestError, match="rendering the chat template failed: Conversations start"):
            await o.chat.completions.create(model="m", messages=[{"role": "assistant", "content": "x"}])
        await o.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert [c.status for c in await server.close_session(sess.session_id)] == [400, 200]
    finally:
        await backend.aclose()


async def test_a_seed_past_64_bits_is_refused_and_the_episode_beside_it_goes_on(server: ProxyServer, hf_backend) -> None:
    """Another episode's call decoding in the same batch once failed with it (see test_backend_hf_batching)."""
    import asyncio

    import openai

    victim, attacker = (server.open_session(hf_backend, sampling={"max_tokens": 24}) for _ in range(2))
    v = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key=victim.api_key, max_retries=0)
    a = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key=attacker.api_key, max_retries=0)
    running = asyncio.create_task(v.chat.completions.create(model="m", messages=[{"role": "user", "content": "tell a story"}]))
    for seed in (1 << 70, -(1 << 63) - 1):
        with pytest.raises(openai.BadRequestError, match="seed: expected a 64-bit integer"):
            await a.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], seed=seed)
    assert (await running).choices[0].message is not None
    assert [c.status for c in await server.close_session(victim.session_id)] == [200]
