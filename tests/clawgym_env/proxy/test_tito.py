"""Token-in-token-out: prompts rendered with a real tokenizer's chat template, sampled ids spliced exactly."""

from __future__ import annotations

import json

import anthropic
import openai

from clawgym_env.capture import read_capture
from clawgym_env.proxy import Completion, ProxyServer, ScriptedBackend

from .conftest import WRITE_CALL, WRITE_TOOL_ANTHROPIC, WRITE_TOOL_OPENAI


def odd_ids(tok, text: str) -> list[int]:
    """A valid but non-canonical tokenization (one piece per character): re-tokenizing can never reproduce it."""
    out: list[int] = []
    for ch in text:
        out += tok(ch, add_special_tokens=False)["input_ids"]
    return out + [tok.eos_token_id]


def render_ids(tok, messages, tools=None) -> list[int]:
    text = tok.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
    return tok(text, add_special_tokens=False)["input_ids"]


async def test_first_prompt_is_the_plain_chat_template_rendering(server: ProxyServer, tiny_tokenizer) -> None:
    sess = server.open_session(ScriptedBackend(["hello"], tokenizer=tiny_tokenizer))
    c = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key=sess.api_key, max_retries=0)
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "write a file"}]
    r = await c.chat.completions.create(model="m", messages=msgs, tools=[WRITE_TOOL_OPENAI])
    assert r.choices[0].message.content == "hello"
    rec = sess.calls[0]
    assert rec.prompt_ids == render_ids(tiny_tokenizer, msgs, [WRITE_TOOL_OPENAI])
    assert rec.completion_ids[-1] == tiny_tokenizer.eos_token_id and rec.token_source == "tokenized"
    assert rec.reused_prompt_tokens == 0 and r.usage.prompt_tokens == len(rec.prompt_ids)


async def test_claude_code_replay_extends_previous_prompt_and_completion(server: ProxyServer, tiny_tokenizer, tmp_path) -> None:
    """Three streamed calls; cache_control moves and content flips string<->blocks as Claude Code does."""
    script = [
        {"reasoning": "need a file", **WRITE_CALL},
        {"text": "checking", "tool_calls": [{"name": "Write", "arguments": {"file_path": "b.txt", "content": "second"}}]},
        "done",
    ]
    sess = server.open_session(ScriptedBackend(script, tokenizer=tiny_tokenizer), capture_path=tmp_path / "cap.jsonl")
    c = anthropic.AsyncAnthropic(base_url=server.url, api_key=sess.api_key, max_retries=0)
    system = [{"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral"}}]
    history: list[dict] = [{"role": "user", "content": [{"type": "text", "text": "make files", "cache_control": {"type": "ephemeral"}}]}]
    for turn in range(3):
        async with c.messages.stream(model="m", max_tokens=64, system=system, messages=history, tools=[WRITE_TOOL_ANTHROPIC]) as s:
            final = await s.get_final_message()
        history[0] = {"role": "user", "content": "make files"}  # the harness re-sends it as a plain string
        blocks = [b.model_dump(exclude_none=True) for b in final.content]
        history.append({"role": "assistant", "content": blocks})
        if final.stop_reason != "tool_use":
            break
        tool_use = [b for b in final.content if b.type == "tool_use"][0]
        history.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": tool_use.id,
                        "content": [{"type": "text", "text": f"ok {turn}"}],
                        "cache_control": {"type": "ephemeral"},
                    }
                ],
            }
        )
    calls = await server.close_session(sess.session_id)
    assert len(calls) == 3
    for prev, nxt in zip(calls, calls[1:]):
        head = prev.prompt_ids + prev.completion_ids
        assert nxt.prompt_ids[: len(head)] == head
        assert nxt.reused_prompt_tokens >= len(head)
    assert sess.splice_hit_rate > 0.5
    # the capture file holds the same exact ids
    stored = read_capture(tmp_path / "cap.jsonl")
    assert [r.prompt_ids for r in stored] == [r.prompt_ids for r in calls]
    # ... each line after the first as the previous call's prompt + completion (a reference) and the new ids only
    lines = [json.loads(x) for x in (tmp_path / "cap.jsonl").read_text().splitlines()]
    for i, (prev, nxt) in enumerate(zip(calls, calls[1:]), 1):
        ref, shared = lines[i]["delta"]["prompt"]
        assert ref == i - 1 and shared == len(prev.prompt_ids) + len(prev.completion_ids)
        assert lines[i]["prompt_ids"] == nxt.prompt_ids[shared:]
    assert stored[0].logprobs == [0.0] * len(stored[0].completion_ids)


async def test_sampled_ids_are_spliced_never_retokenized(server: ProxyServer, tiny_tokenizer) -> None:
    tok = tiny_tokenizer
    text = 'I will write it.\n<tool_call>\n{"name": "Write", "arguments": {"file_path": "a.txt", "content": "hello"}}\n</tool_call>'
    sampled = odd_ids(tok, text)
    assert tok(text, add_special_tokens=False)["input_ids"] != sampled[:-1]  # the test has teeth

    def policy(request):
        if request.call_index == 0:
            return Completion(completion_ids=sampled, logprobs=[-0.5] * len(sampled), text=None)
        return "done"

    sess = server.open_session(ScriptedBackend(policy, tokenizer=tok))
    c = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key=sess.api_key, max_retries=0)
    msgs = [{"role": "user", "content": "go"}]
    r1 = await c.chat.completions.create(model="m", messages=msgs, tools=[WRITE_TOOL_OPENAI])
    msg = r1.choices[0].message
    assert msg.content == "I will write it." and json.loads(msg.tool_calls[0].function.arguments)["content"] == "hello"
    msgs += [msg.model_dump(exclude_none=True), {"role": "tool", "tool_call_id": msg.tool_calls[0].id, "content": "ok"}]
    await c.chat.completions.create(model="m", messages=msgs, tools=[WRITE_TOOL_OPENAI])
    first, second = sess.calls
    assert first.token_source == "sampled" and first.logprobs == [-0.5] * len(sampled)
    assert second.prompt_ids[: len(first.prompt_ids) + len(sampled)] == first.prompt_ids + sampled


async def test_openclaw_volatile_message_and_rewritten_ids_still_splice(server: ProxyServer, tiny_tokenizer) -> None:
    """Call N+1 drops call N's volatile trailing user message: no prefix chain, yet the sampled turn is spliced."""
    tok = tiny_tokenizer
    text = '<tool_call>\n{"name": "Write", "arguments": {"file_path": "a.txt", "content": "hello"}}\n</tool_call>'
    sampled = odd_ids(tok, text)
    sess = server.open_session(
        ScriptedBackend(
            lambda r: Completion(completion_ids=sampled, logprobs=[0.0] * len(sampled)) if r.call_index == 0 else "ok", tokenizer=tok
        )
    )
    c = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key=sess.api_key, max_retries=0)
    base = [{"role": "system", "content": "agent"}, {"role": "user", "content": "make a.txt"}]
    volatile = {"role": "user", "content": "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>> t=1"}
    r1 = await c.chat.completions.create(model="m", messages=base + [volatile], tools=[WRITE_TOOL_OPENAI])
    tc = r1.choices[0].message.tool_calls[0]
    echoed = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": tc.id.replace("_", ""),
                "type": "function",
                "function": {"name": "Write", "arguments": json.dumps({"content": "hello", "file_path": "a.txt"})},
            }
        ],
    }
    result = {"role": "tool", "tool_call_id": tc.id.replace("_", ""), "content": "written"}
    volatile2 = {"role": "user", "content": "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>> t=2"}
    await c.chat.completions.create(model="m", messages=base + [echoed, result, volatile2], tools=[WRITE_TOOL_OPENAI])
    first, second = sess.calls
    head = render_ids(tok, base, [WRITE_TOOL_OPENAI])[: -len(tok("<|im_start|>assistant\n")["input_ids"])]
    gen = tok("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
    start = len(head) + len(gen)
    assert second.prompt_ids[:start] == head + gen
    assert second.prompt_ids[start : start + len(sampled)] == sampled
    # reused: the history before call 1's volatile message (anchored then) + the sampled turn
    assert second.reused_prompt_tokens >= len(head) + len(sampled) and sess.prompts.spliced_turns == 1
    assert not first.prompt_ids[: len(second.prompt_ids)] == second.prompt_ids[: len(first.prompt_ids)]


async def test_edited_history_is_not_falsely_reused(server: ProxyServer, tiny_tokenizer) -> None:
    tok = tiny_tokenizer
    sess = server.open_session(ScriptedBackend(["one", "two"], tokenizer=tok))
    c = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key=sess.api_key, max_retries=0)
    await c.chat.completions.create(model="m", messages=[{"role": "user", "content": "first question"}])
    edited = [
        {"role": "user", "content": "a different question"},
        {"role": "assistant", "content": "one"},
        {"role": "user", "content": "next"},
    ]
    await c.chat.completions.create(model="m", messages=edited)
    second = sess.calls[1]
    # "one" is a sampled turn, so it is spliced; everything else is the template's rendering
    assert tok.decode(second.prompt_ids) == tok.apply_chat_template(edited, tokenize=False, add_generation_prompt=True)
    closing = tok("\n", add_special_tokens=False)["input_ids"]  # what the template puts after <|im_end|>
    assert second.reused_prompt_tokens == len(sess.calls[0].completion_ids) + len(closing)


async def test_tools_change_invalidates_the_prefix(server: ProxyServer, tiny_tokenizer) -> None:
    tok = tiny_tokenizer
    sess = server.open_session(ScriptedBackend(["a", "b"], tokenizer=tok))
    c = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key=sess.api_key, max_retries=0)
    msgs = [{"role": "user", "content": "hi"}]
    await c.chat.completions.create(model="m", messages=msgs)
    await c.chat.completions.create(model="m", messages=msgs, tools=[WRITE_TOOL_OPENAI])
    assert sess.calls[1].prompt_ids == render_ids(tok, msgs, [WRITE_TOOL_OPENAI])
    assert sess.calls[1].reused_prompt_tokens == 0


async def test_count_tokens_uses_the_chat_template(server: ProxyServer, tiny_tokenizer) -> None:
    tok = tiny_tokenizer
    sess = server.open_session(ScriptedBackend([], tokenizer=tok))
    c = anthropic.AsyncAnthropic(base_url=server.url, api_key=sess.api_key, max_retries=0)
    msgs = [{"role": "user", "content": "count these tokens please"}]
    n = await c.messages.count_tokens(model="m", system="sys", messages=msgs, tools=[WRITE_TOOL_ANTHROPIC])
    neutral = [{"role": "system", "content": "sys"}, *msgs]
    text = tok.apply_chat_template(neutral, tools=[WRITE_TOOL_OPENAI], tokenize=False)
    assert n.input_tokens == len(tok(text, add_special_tokens=False)["input_ids"]) and sess.calls == []
