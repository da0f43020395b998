"""Fixtures: a real ProxyServer on 127.0.0.1 (TCP + unix socket) and a real tiny HF tokenizer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from clawgym_env.proxy import ProxyServer


@pytest.fixture(scope="session")
def tiny_tokenizer():
    """The real byte-level BPE tokenizer + tools ChatML template of H5's tiny model (built once, cached)."""
    from transformers import AutoTokenizer

    from clawgym_env.models.testing import tiny_model_path

    return AutoTokenizer.from_pretrained(tiny_model_path())


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[ProxyServer]:
    async with ProxyServer(host="127.0.0.1", port=0, uds_path=tmp_path / "proxy.sock") as srv:
        yield srv


WRITE_TOOL_ANTHROPIC = {
    "name": "Write",
    "description": "Write a file.",
    "input_schema": {
        "type": "object",
        "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["file_path", "content"],
    },
    "cache_control": {"type": "ephemeral"},
}
WRITE_TOOL_OPENAI = {
    "type": "function",
    "function": {"name": "Write", "description": "Write a file.", "parameters": WRITE_TOOL_ANTHROPIC["input_schema"]},
}
WRITE_CALL = {"tool_calls": [{"name": "Write", "arguments": {"file_path": "a.txt", "content": "hello"}}]}
