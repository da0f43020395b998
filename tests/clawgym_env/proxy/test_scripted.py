"""ScriptedBackend: by index, by rule, by function, from YAML/JSON files; tokenized mode."""

from __future__ import annotations

import json

import pytest

from clawgym_env.errors import ConfigError, PolicyBackendError
from clawgym_env.proxy import Completion, CompletionRequest, ScriptedBackend


def req(i: int, messages: list[dict]) -> CompletionRequest:
    return CompletionRequest(session_id="s", call_index=i, prompt_ids=None, messages=messages)


USER = [{"role": "system", "content": "You are OpenClaw."}, {"role": "user", "content": "create a.txt"}]


async def test_yaml_script_rules_then_replies_then_default(tmp_path) -> None:
    path = tmp_path / "script.yaml"
    path.write_text(
        "rules:\n"
        "  - match: '(?i)summari[sz]e'\n"
        "    reply: {text: summary}\n"
        "  - match: OpenClaw\n"
        "    scope: system\n"
        "    reply: claw\n"
        "replies:\n"
        "  - tool_calls: [{name: Write, arguments: {file_path: a.txt, content: hi}}]\n"
        "  - done\n"
        "default: bye\n"
    )
    b = ScriptedBackend.from_file(path)
    out = await b.handle(req(0, [{"role": "user", "content": "please Summarize"}]))
    assert out.structured["content"] == "summary"
    assert (await b.handle(req(1, USER))).text == "claw"
    first = await b.handle(req(2, [{"role": "user", "content": "x"}]))
    assert first.structured["tool_calls"] == [{"name": "Write", "arguments": {"file_path": "a.txt", "content": "hi"}}]
    assert (await b.handle(req(3, [{"role": "tool", "content": "ok"}]))).text == "done"
    assert (await b.handle(req(4, [{"role": "user", "content": "x"}]))).text == "bye"
    assert out.completion_ids is None and out.token_source == "none"


async def test_json_list_script_and_exhaustion(tmp_path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps(["one"]))
    b = ScriptedBackend(path)
    assert (await b.handle(req(0, USER))).text == "one"
    with pytest.raises(PolicyBackendError, match="exhausted after 1"):
        await b.handle(req(1, USER))


def test_bad_scripts_name_the_file_and_fix(tmp_path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        ScriptedBackend(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("replys: []\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: unknown keys \['replys'\]"):
        ScriptedBackend(bad)
    bad.write_text("rules: [{match: x}]\n")
    with pytest.raises(ConfigError, match="`match` .* and `reply`"):
        ScriptedBackend(bad)


async def test_async_callable_and_completion_passthrough() -> None:
    async def fn(request: CompletionRequest):
        return Completion(completion_ids=[5, 6], logprobs=[-1.0, -2.0], text="hi")

    out = await ScriptedBackend(fn).handle(req(0, USER))
    assert out.completion_ids == [5, 6] and out.logprobs == [-1.0, -2.0]


async def test_tokenizer_mode_emits_hermes_markup_ids(tiny_tokenizer) -> None:
    b = ScriptedBackend(
        [{"reasoning": "r", "text": "t", "tool_calls": [{"name": "Write", "arguments": {"a": 1}}]}], tokenizer=tiny_tokenizer
    )
    assert b.TOKEN_LEVEL and b.tokenizer is tiny_tokenizer
    out = await b.handle(req(0, USER))
    assert out.token_source == "tokenized" and out.completion_ids[-1] == tiny_tokenizer.eos_token_id
    decoded = tiny_tokenizer.decode(out.completion_ids, skip_special_tokens=True)
    assert decoded == '<think>\nr\n</think>\n\nt\n<tool_call>\n{"name":"Write","arguments":{"a":1}}\n</tool_call>'
    assert not ScriptedBackend(["x"]).TOKEN_LEVEL
