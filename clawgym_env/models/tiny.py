"""A tiny Qwen3-architecture model with a locally trained byte-level BPE tokenizer, for fast tests.

There is no model hub here, and tests need a real tokenizer + chat template + causal LM that
loads with ``AutoTokenizer`` / ``AutoModelForCausalLM`` exactly as a user's model would. This
builds one in a few seconds on CPU: random weights (deterministic by seed) and a BPE tokenizer
trained on a small built-in corpus, with the ChatML/tool special tokens and our tools-capable
chat template. Folders are cached by a hash of every input, so building twice reuses the first.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from clawgym_env.models.cache import atomic_dir, models_cache_dir
from clawgym_env.models.chat_template import SPECIAL_TOKENS, TOOL_TOKENS, TOOLS_CHATML_TEMPLATE

__all__ = ["DEFAULT_MAX_POSITIONS", "build_scratch_model", "build_tiny_model", "tiny_corpus"]

_BUILD_VERSION = 1  # bump when the build recipe changes, so old cached folders are not reused

_SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "You are a helpful assistant that edits files in a sandboxed workspace.",
    "Please read the file, fix the failing test and report what you changed.",
    "I will list the directory first, then open the configuration file.",
    "The task is done: the output file has been written and the tests pass.",
    "Error: no such file or directory. Let me check the path again.",
    "Reward is computed by a hidden verifier after the harness exits.",
]
_CODE = [
    "def main(argv: list[str]) -> int:\n    for arg in argv:\n        print(arg)\n    return 0\n",
    "import json\nwith open('data.json') as f:\n    data = json.load(f)\nprint(len(data))\n",
    "class Counter:\n    def __init__(self):\n        self.n = 0\n\n    def add(self, k=1):\n        self.n += k\n",
    "for i in range(10):\n    if i % 2 == 0:\n        continue\n    total += i * i\n",
    "$ ls -la /workspace && cat README.md | head -n 20\n$ python -m pytest -x -q\n",
    "SELECT name, count(*) FROM users WHERE age > 30 GROUP BY name ORDER BY 2 DESC;\n",
]
_TOOL_CALLS = [
    {"name": "read_file", "arguments": {"path": "src/main.py"}},
    {"name": "write_file", "arguments": {"path": "out.txt", "content": "hello world\n"}},
    {"name": "bash", "arguments": {"command": "ls -la && pwd"}},
    {"name": "search", "arguments": {"query": "failing test", "max_results": 5}},
]


def tiny_corpus() -> list[str]:
    """The built-in training text: prose, code, shell, JSON tool calls and chat markup."""
    lines: list[str] = []
    for i in range(20):
        for s in _SENTENCES:
            lines.append(s if i % 2 else s.lower())
        lines.extend(_CODE)
        for call in _TOOL_CALLS:
            lines.append("<tool_call>\n" + json.dumps(call) + "\n</tool_call>")
        lines.append(json.dumps({"type": "function", "function": {"name": f"tool_{i}", "parameters": {}}}))
        lines.append(f"Step {i}: {i * 7} + {i * 3} = {i * 10}. Numbers 0123456789 {i**3}.")
    return lines


DEFAULT_MAX_POSITIONS = 32768


def _recipe(
    seed: int,
    vocab_size: int,
    hidden: int,
    layers: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    max_positions: int = DEFAULT_MAX_POSITIONS,
) -> dict:
    recipe = {
        "build_version": _BUILD_VERSION,
        "seed": seed,
        "vocab_size": vocab_size,
        "hidden": hidden,
        "layers": layers,
        "heads": heads,
        "kv_heads": kv_heads,
        "head_dim": head_dim,
        "template": TOOLS_CHATML_TEMPLATE,
        "special": SPECIAL_TOKENS,
        "tool_tokens": TOOL_TOKENS,
        "corpus": hashlib.sha256("\n".join(tiny_corpus()).encode()).hexdigest(),
    }
    if max_positions != DEFAULT_MAX_POSITIONS:  # only then, so the default model keeps its hash (and cached folder)
        recipe["max_positions"] = max_positions
    return recipe


def build_tiny_model(
    out_dir: Path | None = None,
    *,
    seed: int = 0,
    vocab_size: int = 1024,
    hidden: int = 64,
    layers: int = 2,
    heads: int = 2,
    kv_heads: int = 1,
    head_dim: int = 32,
    max_positions: int = DEFAULT_MAX_POSITIONS,
) -> Path:
    """Build (or reuse) a tiny model folder ``<out_dir>/tiny-<hash>`` and return its path.

    ``out_dir`` defaults to the models cache (``~/.cache/clawgym/models``). ``vocab_size`` is the
    BPE target; the model's vocabulary is sized to the tokenizer that results. ``max_positions`` is
    the model's (and tokenizer's) context length: raise it for harnesses whose prompts are longer than
    32,768 tiny-tokenizer tokens (Qwen Code's first prompt is ~45k); weights are the same draw either way
    (RoPE has no position table).
    """
    recipe = _recipe(seed, vocab_size, hidden, layers, heads, kv_heads, head_dim, max_positions)
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]
    target = Path(out_dir or models_cache_dir()) / f"tiny-{digest}"
    return atomic_dir(target, lambda tmp: _build(tmp, recipe))


def build_scratch_model(
    out_dir: Path,
    corpus: list[str],
    *,
    seed: int = 0,
    vocab_size: int = 4096,
    hidden: int = 64,
    layers: int = 2,
    heads: int = 2,
    kv_heads: int = 1,
    head_dim: int = 32,
) -> Path:
    """A randomly initialised model of the same architecture with a BPE tokenizer trained on ``corpus``.

    For a policy trained from scratch (``trainers/scripts/experiment_pass1.py``): the tokenizer learns the
    text the model will see (harness prompts, instructions), and digits are split one per token so
    numbers are spelled from ten shared tokens. Cached under ``<out_dir>/scratch-<hash>``.
    """
    recipe = _recipe(seed, vocab_size, hidden, layers, heads, kv_heads, head_dim)
    recipe["corpus"] = hashlib.sha256("\n".join(corpus).encode()).hexdigest()
    recipe["split_digits"] = True
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]
    return atomic_dir(Path(out_dir) / f"scratch-{digest}", lambda tmp: _build(tmp, recipe, corpus))


def _build(folder: Path, recipe: dict, corpus: list[str] | None = None) -> None:
    max_positions = recipe.get("max_positions", DEFAULT_MAX_POSITIONS)
    tokenizer = _train_tokenizer(recipe["vocab_size"], corpus, split_digits=recipe.get("split_digits", False), max_positions=max_positions)
    tokenizer.save_pretrained(folder)
    _build_model(folder, recipe, tokenizer, max_positions)
    (folder / "clawgym_recipe.json").write_text(json.dumps(recipe, indent=1, sort_keys=True))


def _train_tokenizer(
    vocab_size: int, corpus: list[str] | None = None, *, split_digits: bool = False, max_positions: int = DEFAULT_MAX_POSITIONS
):  # -> PreTrainedTokenizerFast
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level]) if split_digits else byte_level
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS + TOOL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus if corpus is not None else tiny_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>", "<|im_end|>"],
        model_max_length=max_positions,
        clean_up_tokenization_spaces=False,
    )
    # The BPE trainer registered every token as special; tool tokens must survive decoding.
    from tokenizers import AddedToken

    fast.add_tokens([AddedToken(t, special=False, normalized=False) for t in TOOL_TOKENS])
    fast.chat_template = TOOLS_CHATML_TEMPLATE
    return fast


def _build_model(folder: Path, recipe: dict, tokenizer, max_positions: int) -> None:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(recipe["seed"])
    model: Any = Qwen3ForCausalLM(Qwen3Config(**config_fields(recipe, tokenizer, max_positions)))
    save_model(model, folder, tokenizer)


def config_fields(recipe: dict, tokenizer: Any, max_positions: int) -> dict[str, Any]:
    """The Qwen3 config fields every tiny model shares (the MoE adds its experts to them)."""
    return {
        "vocab_size": len(tokenizer),
        "hidden_size": recipe["hidden"],
        "intermediate_size": recipe["hidden"] * 2,
        "num_hidden_layers": recipe["layers"],
        "num_attention_heads": recipe["heads"],
        "num_key_value_heads": recipe["kv_heads"],
        "head_dim": recipe["head_dim"],
        "max_position_embeddings": max_positions,
        "tie_word_embeddings": True,
        "eos_token_id": tokenizer.convert_tokens_to_ids("<|im_end|>"),
        "pad_token_id": tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        "bos_token_id": None,
    }


def save_model(model: Any, folder: Path, tokenizer: Any) -> None:
    """Save ``model`` in fp32, generating until ``<|im_end|>``."""
    import torch
    from transformers import GenerationConfig

    eos, pad = tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.convert_tokens_to_ids("<|endoftext|>")
    model = model.to(torch.float32)
    model.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=pad, bos_token_id=None)
    model.save_pretrained(folder)
