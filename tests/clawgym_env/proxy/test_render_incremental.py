"""Incremental chat-template rendering gives exactly what a full render gives, and the same prompt ids."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clawgym_env.capture.records import CallRecord
from clawgym_env.proxy import _render
from clawgym_env.proxy._neutral import history_keys
from clawgym_env.proxy._render import IncrementalRenderer
from clawgym_env.proxy._tito import PromptBuilder

GOLDEN = Path(__file__).resolve().parents[2] / "golden"


@pytest.fixture(scope="module")
def golden_tokenizer():
    """The tokenizer the golden captures were made with (SmolLM2 + the project's tools template)."""
    from transformers import AutoTokenizer

    from clawgym_env.models.smollm2 import default_model_path

    return AutoTokenizer.from_pretrained(default_model_path())


def _golden(harness: str) -> list[CallRecord]:
    with gzip.open(GOLDEN / harness / "capture.jsonl.gz", "rt") as f:
        return [CallRecord.model_validate_json(line) for line in f]


@pytest.mark.parametrize("harness", ["claude-code", "openclaw"])
@pytest.mark.parametrize("incremental", [True, False])
def test_golden_episode_rebuilds_the_recorded_prompt_ids(harness: str, incremental: bool, golden_tokenizer) -> None:
    """Replaying a real episode's requests gives the ids the proxy sent then, call for call."""
    pb = PromptBuilder(golden_tokenizer, incremental=incremental)
    pb.renderer.verify_every = 1  # every windowed render is also checked against a full one
    for c in _golden(harness):
        ids, reused = pb.build(c.messages, c.tools)
        assert ids == c.prompt_ids, f"call {c.call_index}"
        assert reused == c.reused_prompt_tokens
        pb.remember(c.messages, c.tools, ids, c.completion_ids, c.response)
    if incremental:
        assert pb.renderer.windowed > pb.renderer.full  # most renders were windows, not whole histories
    else:
        assert pb.renderer.windowed == 0


_text = st.text(alphabet=st.sampled_from('ab \n{}"<>:_/é'), max_size=12)
_call = st.fixed_dictionaries(
    {
        "id": st.sampled_from(["c1", "c2", "c3"]),
        "type": st.just("function"),
        "function": st.fixed_dictionaries(
            {"name": st.sampled_from(["Write", "Read"]), "arguments": st.dictionaries(_text, _text, max_size=2)}
        ),
    }
)
_message = st.one_of(
    st.fixed_dictionaries({"role": st.just("user"), "content": _text}),
    st.fixed_dictionaries({"role": st.just("system"), "content": _text}),
    st.fixed_dictionaries({"role": st.just("tool"), "tool_call_id": st.sampled_from(["c1", "c2"]), "content": _text}),
    st.fixed_dictionaries(
        {"role": st.just("assistant"), "content": _text},
        optional={"tool_calls": st.lists(_call, min_size=1, max_size=2), "reasoning_content": _text},
    ),
    st.fixed_dictionaries(
        {"role": st.just("user"), "content": st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": _text}), max_size=2)}
    ),
)
_tools = st.lists(
    st.fixed_dictionaries(
        {
            "type": st.just("function"),
            "function": st.fixed_dictionaries(
                {"name": st.sampled_from(["Write", "Read"]), "description": _text, "parameters": st.just({"type": "object"})}
            ),
        }
    ),
    max_size=2,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=st.lists(_message, min_size=1, max_size=9), tools=_tools, cuts=st.lists(st.integers(1, 9), max_size=4), gen=st.booleans())
def test_windowed_render_equals_full_render(history, tools, cuts, gen, tiny_tokenizer) -> None:
    """Growing a random history call by call: each incremental render is the full render."""
    r = IncrementalRenderer(tiny_tokenizer, verify_every=0)
    keys = history_keys(history, tools)[1]
    for j in sorted({min(c, len(history)) for c in cuts} | {len(history)}):
        got = r.render(history, j, tools, gen, keys)
        assert got == r.apply(history[:j], tools, gen)


def test_a_context_dependent_template_is_caught_and_rendered_in_full(tiny_tokenizer, monkeypatch) -> None:
    """A template that numbers turns breaks the window identity; the check sees it and falls back."""
    tok = type(tiny_tokenizer).from_pretrained(tiny_tokenizer.name_or_path)
    tok.chat_template = (
        "{% for m in messages %}{{ loop.index }}:{{ m.role }}:{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}A:{% endif %}"
    )
    monkeypatch.setattr(_render, "_UNSAFE_TEMPLATES", set())
    monkeypatch.setattr(_render, "_CHECKED", {})
    msgs = [{"role": "system", "content": "s"}] + [{"role": "user", "content": f"u{i}"} for i in range(6)]
    r = IncrementalRenderer(tok, verify_every=16)
    keys = history_keys(msgs, [])[1]
    for j in range(1, len(msgs) + 1):
        assert r.render(msgs, j, [], False, keys) == r.apply(msgs[:j], [], False)
    assert len(_render._UNSAFE_TEMPLATES) == 1  # caught on its first shifted window, then rendered in full
    assert r.windowed == 2 and r.full == len(msgs) - 2


@pytest.mark.parametrize("varies", [False, True])
def test_generation_prompt_is_derived_only_while_it_is_one_constant_suffix(tiny_tokenizer, monkeypatch, varies) -> None:
    """With the generation prompt a constant suffix, gen renders are plain renders + suffix (after a few real ones);
    one that follows the last role is learnt per role; one that varies otherwise is caught when a render is checked
    (here every one of them)."""
    tok = type(tiny_tokenizer).from_pretrained(tiny_tokenizer.name_or_path)
    gen = (
        "{% if messages[-1].role == 'tool' %}T:{% else %}A:{% endif %}{% if messages|length == 8 %}8{% endif %}"
        if varies
        else "{% if messages[-1].role == 'tool' %}T:{% else %}A:{% endif %}"
    )
    tok.chat_template = (
        "{% for m in messages %}{{ m.role }}:{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}" + gen + "{% endif %}"
    )
    for name, value in (("_UNSAFE_TEMPLATES", set()), ("_CHECKED", {}), ("_GEN_SUFFIX", {}), ("_GEN_CHECKED", {}), ("_GEN_VARIES", set())):
        monkeypatch.setattr(_render, name, value)
    msgs = [{"role": "system", "content": "s"}] + [{"role": "user" if i % 3 else "tool", "content": f"m{i}"} for i in range(1, 10)]
    r = IncrementalRenderer(tok, verify_every=1 if varies else 0)
    keys = history_keys(msgs, [])[1]
    for j in range(1, len(msgs) + 1):
        assert r.render(msgs, j, [], True, keys) == r.apply(msgs[:j], [], True)
        r.render(msgs, j, [], False, keys)
    assert bool(_render._GEN_VARIES) is varies
    if not varies:
        assert sorted(_render._GEN_SUFFIX.values()) == ["A:", "A:", "T:"] and r.gen_derived == len(msgs)
        assert _render._GEN_CHECKED[(r._digest, keys[1], "user")] == _render._FIRST_CHECKS  # then derived


def test_first_turn_ids_are_shared_across_episodes_of_one_tokenizer(tiny_tokenizer) -> None:
    tools = [{"type": "function", "function": {"name": "Write", "description": "w", "parameters": {"type": "object"}}}]
    msgs = [{"role": "system", "content": "You are an agent. " * 200}, {"role": "user", "content": "go"}]
    first, _ = PromptBuilder(tiny_tokenizer).build(msgs, tools)
    second_builder = PromptBuilder(tiny_tokenizer)
    second, reused = second_builder.build(msgs, tools)
    assert first == second and second_builder.shared_hits == 1  # same ids, the system turn not tokenized again
    assert reused == 0  # another episode's tokens do not count as this episode's splices
    assert json.dumps(first) == json.dumps(PromptBuilder(tiny_tokenizer, incremental=False).build(msgs, tools)[0])


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    history=st.lists(_message, min_size=1, max_size=6),
    gen=st.booleans(),
    nones=st.lists(st.sampled_from(["content", "tool_calls", "reasoning_content", "name"]), max_size=2),
)
def test_a_window_rendered_directly_equals_apply_chat_template(history, gen, nones, tiny_tokenizer) -> None:
    """Windows skip apply_chat_template's wrapper (its conversions made once per message and call): same text,
    None-valued keys dropped and reasoning aliased as transformers does; a message changed after new_call() is
    converted again."""
    history = [{**m, **dict.fromkeys(nones)} if i % 2 else m for i, m in enumerate(history)]
    r = IncrementalRenderer(tiny_tokenizer, verify_every=0)
    assert r._direct is not None  # this transformers offers the steps: the direct path is the one tested
    assert r._apply_window(history, gen) == r.apply(history, [], gen)
    assert r._apply_window(history, gen) == r.apply(history, [], gen)  # second time from the per-call conversions
    history[-1]["content"] = "changed"
    r.new_call()
    assert r._apply_window(history, gen) == r.apply(history, [], gen)


def test_short_texts_are_encoded_once_per_session(tiny_tokenizer) -> None:
    pb = PromptBuilder(tiny_tokenizer)
    text = "<|im_start|>assistant\n"
    first = pb._encode(text)
    assert first == pb._encode_text(text) and pb._encode(text) is first
    long = "x y " * 40
    assert pb._encode(long) == pb._encode_text(long) and long not in pb._short
