"""The embedded SmolLM2 converts once, loads as a plain HF model and answers a question."""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from clawgym_env.models.smollm2 import default_model_path


def test_default_model_converts_once_loads_and_generates() -> None:
    path = default_model_path()
    assert default_model_path() == path  # cached: the second call finds the folder complete
    assert "quantization_config" not in (path / "config.json").read_text()
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    assert tok.eos_token == "<|im_end|>"
    messages = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
    enc = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    out = model.generate(**enc, max_new_tokens=12, do_sample=False)
    answer = tok.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    assert "Paris" in answer


def test_default_model_template_renders_tools_hermes_style() -> None:
    tok = AutoTokenizer.from_pretrained(default_model_path())
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    call = {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "bash", "arguments": {"command": "ls"}}}]}
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}, call], tools=tools, tokenize=False)
    assert "<tools>\n" + '{"type": "function"' in text
    assert '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call><|im_end|>' in text
