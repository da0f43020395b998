"""Expert trajectories through the real harnesses: each task's reference command, replayed as a policy.

Why through the harness: the prompts a policy must answer are exactly what that harness sends (its
system prompt, tool schemas, tool-result wrapping), and the proxy renders them with the model's
tokenizer, so the captured prompt ids are the ids the model will see at evaluation. The expert is a
token-level ``ScriptedBackend``: first call, one shell tool call running the task's reference
command (``metadata.procgen.command``); once a tool result is in the conversation, "Done.". A
multi-step task (``metadata.procgen.steps``, ``procgen_multistep``) gets one call per step, step i
once i tool results are in, then "Done.". With ``look_first`` the expert reads before it acts (``look_command``:
``cat`` of the first workspace file the instruction names, else ``ls``), so its episodes show a command issued
after a tool result, the shape a read-then-act task needs, while the act itself stays the reference command. Only
episodes the task's verifier scores 1.0 are kept (rejection sampling), and they are written as an
HF ``datasets`` dataset on disk: one row per episode, the capture records (ids, logprobs, the
parsed response) as JSON without the bulky rendered messages.
"""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawgym_env.capture.records import CallRecord
from clawgym_env.errors import ConfigError

if TYPE_CHECKING:
    from clawgym_env.episode import EpisodeResult
    from clawgym_env.proxy.backends.base import CompletionRequest
    from clawgym_env.task import TaskSpec

__all__ = ["SHELL_TOOLS", "capture_experts", "expert_command", "expert_steps", "load_episodes", "look_command", "write_dataset"]

SHELL_TOOLS = ("Bash", "bash", "exec")
"""Shell tool names, in order of preference: Claude Code, custom, OpenClaw."""


def expert_command(task: TaskSpec) -> str:
    """The task's reference shell command (procgen tasks carry it in ``metadata.procgen.command``)."""
    command = (task.metadata.get("procgen") or {}).get("command")
    if not command:
        raise ConfigError(f"{task.full_id}: no metadata.procgen.command; expert replay needs a procgen task")
    return str(command)


def look_command(task: TaskSpec) -> str:
    """A read before the act: ``cat`` of the workspace file the instruction names first, else ``ls``."""
    files = sorted(p.name for p in task.workspace_dir.iterdir() if p.is_file()) if task.workspace_dir else []
    named = [(m.start(), f) for f in files if (m := re.search(rf"(?<![\w.]){re.escape(f)}(?![\w])", task.instruction))]
    return f"cat {min(named)[1]}" if named else "ls"


def expert_steps(task: TaskSpec, *, look_first: bool = False) -> list[str]:
    """The commands the expert runs, one call each: ``metadata.procgen.steps``, else the one reference command;
    with ``look_first``, ``look_command`` before them."""
    steps = (task.metadata.get("procgen") or {}).get("steps")
    commands = [str(s) for s in steps] if steps else [expert_command(task)]
    return [look_command(task), *commands] if look_first else commands


def _tool_names(request: CompletionRequest) -> list[str]:
    return [str((t.get("function") or t).get("name", "")) for t in request.tools]


def _reply(steps: Sequence[str]):  # -> ReplyFn
    def reply(request: CompletionRequest) -> dict[str, Any]:
        done = sum(m.get("role") == "tool" for m in request.messages)
        if done >= len(steps):
            return {"text": "Done."}
        names = _tool_names(request)
        shell = next((n for n in SHELL_TOOLS if n in names), None)
        if shell is None:
            raise ConfigError(f"expert: the harness offers no shell tool ({names}); expected one of {SHELL_TOOLS}")
        return {"tool_calls": [{"name": shell, "arguments": {"command": steps[done]}}]}

    return reply


async def capture_experts(
    tasks: Sequence[TaskSpec],
    harnesses: Sequence[str],
    tokenizer: Any,
    *,
    sandbox: str = "bwrap",
    concurrency: int = 4,
    look_first: bool = False,
) -> list[EpisodeResult]:
    """One expert episode per (task, harness), all behind one proxy; every result is returned (filter by score)."""
    from clawgym_env.episode import run_episode
    from clawgym_env.proxy import ProxyServer
    from clawgym_env.proxy.backends.scripted import ScriptedBackend

    gate = asyncio.Semaphore(concurrency)

    async def one(task: TaskSpec, harness: str, proxy: ProxyServer) -> EpisodeResult:
        async with gate:
            backend = ScriptedBackend(_reply(expert_steps(task, look_first=look_first)), tokenizer=tokenizer)
            return await run_episode(task, harness, backend, proxy=proxy, sandbox=sandbox)

    with tempfile.TemporaryDirectory(prefix="clawgym-expert-") as d:
        async with ProxyServer(uds_path=Path(d) / "proxy.sock") as proxy:
            return list(await asyncio.gather(*(one(t, h, proxy) for t in tasks for h in harnesses)))


def write_dataset(results: Sequence[EpisodeResult], path: Path) -> dict[str, int]:
    """Keep the episodes scored 1.0 and save them with ``datasets``; returns kept / dropped counts per harness."""
    from datasets import Dataset

    rows: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    for r in results:
        ok = r.status == "completed" and r.score >= 1.0 and all(c.prompt_ids and c.completion_ids for c in r.calls)
        key = f"{'kept' if ok else 'dropped'}/{r.harness}"
        counts[key] = counts.get(key, 0) + 1
        if ok:
            calls = [c.model_copy(update={"messages": [], "tools": []}).model_dump(mode="json") for c in r.calls]
            rows.append(
                {
                    "task_id": r.task_id,
                    "harness": r.harness,
                    "session_id": r.session_id,
                    "score": float(r.score),
                    "num_calls": len(calls),
                    "prompt_tokens": len(r.calls[-1].prompt_ids or []),
                    "calls": json.dumps(calls),
                }
            )
    if not rows:
        raise ConfigError(f"expert capture: no episode scored 1.0 ({counts}); check the harness install and the suite")
    Dataset.from_list(rows).save_to_disk(str(path))
    return counts


def load_episodes(path: Path | str) -> list[tuple[str, str, list[CallRecord]]]:
    """``(task id, harness, calls)`` per episode of a dataset written by ``write_dataset``."""
    from datasets import load_from_disk

    folder = Path(path)
    if not (folder / "dataset_info.json").is_file():
        raise ConfigError(f"{folder}: not a datasets folder (no dataset_info.json); run the expert capture first")
    ds = load_from_disk(str(folder))
    return [(row["task_id"], row["harness"], [CallRecord.model_validate(c) for c in json.loads(row["calls"])]) for row in ds]
