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
        async with c.messages.stream(model="m", max_tokens=4096, system="agent", messages=history,
                                     tools=[WRITE_TOOL_ANTHROPIC]) as s:
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
