"""The golden captures are real, complete and token-level: what the prefix-tree code relies on."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from clawgym_env.capture.records import CallRecord
from harnesses.claude_code import ClaudeCode

HERE = Path(__file__).parent


def load(harness: str) -> tuple[list[CallRecord], dict]:
    with gzip.open(HERE / harness / "capture.jsonl.gz", "rt") as f:
        calls = [CallRecord.model_validate_json(line) for line in f]
    return calls, json.loads((HERE / harness / "meta.json").read_text())


def own_count(harness: str) -> int:
    folder = HERE / harness / "harness"
    if harness == "claude-code":
        return ClaudeCode().count_calls(folder)
    events = [json.loads(line) for line in (folder / "transcript.jsonl").read_text().splitlines()]
    return sum(1 for e in events if e.get("type") == "message" and e["message"].get("role") == "assistant")


@pytest.mark.parametrize("harness", ["claude-code", "openclaw"])
def test_golden_capture_is_complete_and_token_level(harness: str) -> None:
    calls, meta = load(harness)
    assert len(calls) == meta["calls"] == own_count(harness) == 21
    assert [c.call_index for c in calls] == list(range(21))
    assert len({c.session_id for c in calls}) == 1
    for c in calls:
        assert c.error is None and c.prompt_ids and c.completion_ids
        assert c.logprobs is not None and len(c.logprobs) == len(c.completion_ids)
    assert sum(len(c.prompt_ids or []) for c in calls) == meta["prompt_tokens"]
    # every call but the last wrote one file through the harness's own tool
    assert all(c.response and c.response.get("tool_calls") for c in calls[:20])
    assert "Done" in calls[20].response["content"]
    assert sum(c.reused_prompt_tokens for c in calls) > 0.9 * sum(len(c.prompt_ids or []) for c in calls[1:])
