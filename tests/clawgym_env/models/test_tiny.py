"""The tiny model loads like any HF model, renders our chat template and is cached by content."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from clawgym_env.models.tiny import build_tiny_model

TOOLS = [{"type": "function", "function": {"name": "bash", "description": "Run a command", "parameters": {"type": "object"}}}]
HISTORY = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": [{"type": "text", "text": "list files"}]},
    {
        "role": "assistant",
        "content": "",
        "reasoning_content": "use bash",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
    {"role": "tool", "tool_call_id": "c2", "content": "b.txt"},
    {"role": "assistant", "content": "Two files."},
]


def test_loads_with_auto_classes_and_has_chat_tokens(tiny_model_dir: Path) -> None:
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert model.config.model_type == "qwen3"
    assert model.config.vocab_size == len(tok)
    assert tok.eos_token == "<|im_end|>"
    for t in ["<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>"]:
        assert tok.convert_tokens_to_ids(t) != tok.unk_token_id
        assert tok.encode(t, add_special_tokens=False) == [tok.convert_tokens_to_ids(t)]
    # tool markup survives decoding, control tokens do not
    ids = tok.encode("<tool_call>x</tool_call><|im_end|>", add_special_tokens=False)
    assert tok.decode(ids, skip_special_tokens=True) == "<tool_call>x</tool_call>"
    out = model(torch.tensor([tok.encode("hello world")])).logits
    assert out.shape[-1] == len(tok) and torch.isfinite(out).all()


def test_chat_template_renders_tools_calls_reasoning_and_tool_results(tiny_model_dir: Path) -> None:
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    text = tok.apply_chat_template(HISTORY, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\nYou are terse.\n\n# Tools")
    assert json.dumps(TOOLS[0]) in text
    assert '<think>\nuse bash\n</think>\n\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call><|im_end|>' in text
    assert "<|im_start|>user\n<tool_response>\na.txt\n</tool_response>\n<tool_response>\nb.txt\n</tool_response><|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\nTwo files.<|im_end|>\n<|im_start|>assistant\n")
    dict_args = [dict(HISTORY[2], tool_calls=[{"function": {"name": "bash", "arguments": {"command": "ls"}}}])]
    assert '"arguments": {"command": "ls"}}' in tok.apply_chat_template(dict_args, tokenize=False)


def test_rendering_is_prefix_stable(tiny_model_dir: Path) -> None:
    """Rendering a longer history only appends text: what TITO splicing relies on."""
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    for k in range(1, len(HISTORY)):
        short = tok.apply_chat_template(HISTORY[:k], tools=TOOLS, tokenize=False)
        full = tok.apply_chat_template(HISTORY, tools=TOOLS, tokenize=False)
        if HISTORY[k - 1]["role"] != "tool":  # a tool group closes only when the next message arrives
            assert full.startswith(short), k


def test_build_is_deterministic_and_cached(tmp_path: Path) -> None:
    a = build_tiny_model(tmp_path / "a", seed=3)
    b = build_tiny_model(tmp_path / "b", seed=3)
    assert a.name == b.name
    assert (a / "tokenizer.json").read_bytes() == (b / "tokenizer.json").read_bytes()
    ma = AutoModelForCausalLM.from_pretrained(a)
    mb = AutoModelForCausalLM.from_pretrained(b)
    for (n, p), (_, q) in zip(ma.state_dict().items(), mb.state_dict().items(), strict=True):
        assert torch.equal(p, q), n
    mtime = (a / "model.safetensors").stat().st_mtime_ns
    assert build_tiny_model(tmp_path / "a", seed=3) == a
    assert (a / "model.safetensors").stat().st_mtime_ns == mtime
    other = build_tiny_model(tmp_path / "a", seed=4)
    assert other != a
    assert not torch.equal(AutoModelForCausalLM.from_pretrained(other).lm_head.weight, ma.lm_head.weight)
    assert [p.name for p in (tmp_path / "a").iterdir() if p.name.startswith(".")] == []


def test_long_context_variant_is_the_same_model_with_more_positions(tmp_path: Path) -> None:
    """``max_positions`` only lengthens the context (for harnesses with prompts over 32k tokens); the default
    recipe, hence the default folder every other test uses, is unchanged by the option."""
    default = build_tiny_model(tmp_path)
    assert build_tiny_model(tmp_path, max_positions=32768) == default
    long = build_tiny_model(tmp_path, max_positions=65536)
    assert long != default
    short_model, long_model = (AutoModelForCausalLM.from_pretrained(p) for p in (default, long))
    assert (short_model.config.max_position_embeddings, long_model.config.max_position_embeddings) == (32768, 65536)
    assert AutoTokenizer.from_pretrained(long).model_max_length == 65536
    assert (long / "tokenizer.json").read_bytes() == (default / "tokenizer.json").read_bytes()
    for (n, p), (_, q) in zip(short_model.state_dict().items(), long_model.state_dict().items(), strict=True):
        assert torch.equal(p, q), n
    ids = torch.tensor([list(range(40, 80))])
    assert torch.allclose(short_model(ids).logits, long_model(ids).logits)  # same outputs on a short prompt
