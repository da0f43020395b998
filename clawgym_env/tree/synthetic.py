"""SYNTHETIC episodes shaped like the real harnesses, for tests and benchmarks without captures.

These are not captures. They reproduce the two structures measured on the real harnesses:
``claude-code``: every call's prompt extends the previous call's prompt + completion;
``openclaw``: a volatile context message is appended before each call's generation prompt and
removed on the next, so no call ever extends the previous one. Optional retry, subagent and
compaction branches exercise the branch kinds and filters. Token ids are random draws.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from clawgym_env.capture.records import CallRecord

__all__ = ["EpisodeShape", "synthetic_episode", "synthetic_group"]

Style = Literal["claude-code", "openclaw"]
GEN = [1, 3]  # "<|im_start|>assistant" stand-in: the generation prompt
END = [2]  # "<|im_end|>"
THINK = 5  # every completion starts with this id, so rollouts of a group share a sampled token


@dataclass(frozen=True)
class EpisodeShape:
    """Sizes of a synthetic episode; defaults follow the measured 21-call scripted episodes."""

    n_calls: int = 21
    system_tokens: int = 12_000
    task_tokens: int = 60
    completion_tokens: tuple[int, int] = (30, 120)
    tool_result_tokens: tuple[int, int] = (40, 160)
    volatile_tokens: int = 40
    vocab_size: int = 300
    retry_at: int | None = None  # call index whose first attempt fails and is retried
    subagent_at: int | None = None  # call index after which a 3-call subagent runs
    compaction_at: int | None = None  # call index after which history is compacted


def _span(rng: random.Random, n: int, vocab: int) -> list[int]:
    return [rng.randrange(10, vocab) for _ in range(n)]


def _call(session: str, idx: int, prompt: Sequence[int], completion: Sequence[int], rng: random.Random, **extra: object) -> CallRecord:
    return CallRecord(
        session_id=session,
        call_index=idx,
        dialect="anthropic",
        prompt_ids=list(prompt),
        completion_ids=list(completion),
        logprobs=[-rng.random() * 3.0 for _ in completion],
        latency_s=round(0.05 + rng.random() * 0.5, 3),
        **extra,  # type: ignore[arg-type]  # test records: fields by name
    )


def synthetic_episode(
    style: Style,
    session_id: str = "ep0",
    shape: EpisodeShape | None = None,
    *,
    seed: int = 0,
    system: Sequence[int] | None = None,
    task: Sequence[int] | None = None,
) -> list[CallRecord]:
    """One SYNTHETIC episode of ``shape.n_calls`` main-line calls (+ branch calls) in ``style``."""
    s = shape or EpisodeShape()
    rng = random.Random(seed)
    v = s.vocab_size
    system = list(system) if system is not None else _span(random.Random(-1), s.system_tokens, v)
    task = list(task) if task is not None else _span(random.Random(-2), s.task_tokens, v)
    history: list[int] = list(system) + list(task)
    calls: list[CallRecord] = []

    def completion() -> list[int]:
        return [THINK, *_span(rng, rng.randint(*s.completion_tokens) - 1, v)]

    for k in range(s.n_calls):
        volatile = _span(rng, s.volatile_tokens, v) + END if style == "openclaw" else []
        prompt = history + volatile + GEN
        if s.retry_at == k:  # first attempt errors out (bad tool call); the harness resends the prompt
            calls.append(_call(session_id, len(calls), prompt, completion(), rng, finish_reason="error"))
        out = completion()
        calls.append(_call(session_id, len(calls), prompt, out, rng))
        history = history + GEN + out + END + _span(rng, rng.randint(*s.tool_result_tokens), v) + END
        if s.subagent_at == k:
            sub = _span(random.Random(-3), 300, v) + _span(rng, 40, v)
            for _ in range(3):
                sub_out = completion()
                calls.append(_call(session_id, len(calls), sub + GEN, sub_out, rng, meta={"subagent": True, "subagent_id": "a1"}))
                sub = sub + GEN + sub_out + END + _span(rng, 50, v) + END
            history = history + sub_out[1:] + END
        if s.compaction_at == k:
            ask = _span(random.Random(-4), 30, v)
            summary = completion()
            calls.append(_call(session_id, len(calls), history + ask + GEN, summary, rng, meta={"compaction": True}))
            history = list(system) + list(task) + summary + END
    return calls


def synthetic_group(style: Style, n_rollouts: int, shape: EpisodeShape | None = None, *, seed: int = 0) -> list[list[CallRecord]]:
    """A GRPO group: ``n_rollouts`` SYNTHETIC episodes of one task sharing system prompt and task."""
    s = shape or EpisodeShape()
    system = _span(random.Random(-1), s.system_tokens, s.vocab_size)
    task = _span(random.Random(-2), s.task_tokens, s.vocab_size)
    return [synthetic_episode(style, f"rollout{i}", s, seed=seed * 1000 + i, system=system, task=task) for i in range(n_rollouts)]
