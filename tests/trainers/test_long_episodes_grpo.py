"""A tree GRPO step on a group of two real Claude Code episodes (tests/golden/long_episodes.py: claude-code-long,
score 1, and claude-code-long-wrong, score 0) whose trees hold a subagent, a fork, a compaction and a retried call:
the golden captures, and (slow) the same two episodes run now through the Claude Code binary in bwrap.

The captures are the scripted policy's token ids (the tiny model's tokenizer); here they are scored by the tiny
policy itself (one forward per call) and enter the batch as its samples, so the step is a real optimizer step on
the real trees, at importance ratio 1. Prompt runs are cut to their last 32 tokens (``shrink_spans``) so the
~30k-token prompts fit two cores; every completion and branch point stays."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from clawgym_env._sync import run_sync
from clawgym_env.episode import EpisodeResult
from clawgym_env.tree import load_calls
from clawgym_env.tree.transform import shrink_spans
from tests.golden.long_episodes import SUITE, run
from tests.trainers.conftest import make_config
from trainers.rollout import build_batch, tree_filters
from trainers.tree_grpo.trainer import TreeGRPOTrainer

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def scored(model: Any, calls: list[Any]) -> list[Any]:
    """Each call's completion with the policy's own logprobs of it (token_source "sampled")."""
    out = []
    for c in calls:
        if not c.completion_ids:
            out.append(c)
            continue
        ids = torch.tensor([c.prompt_ids + c.completion_ids])
        with torch.no_grad():
            lp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), -1).gather(-1, ids[0, 1:, None])[:, 0]
        out.append(c.model_copy(update={"token_source": "sampled", "logprobs": lp[len(c.prompt_ids) - 1 :].tolist()}))
    return out


def captured(name: str) -> tuple[list[Any], float]:
    if name.startswith("live:"):
        result, _ = run_sync(run(name[5:]))
        assert result.status == "completed", result.error
        return result.calls, result.score
    return load_calls(GOLDEN / name / "capture.jsonl.gz"), json.loads((GOLDEN / name / "meta.json").read_text())["score"]


@pytest.mark.parametrize(
    "source",
    [pytest.param("", id="golden"), pytest.param("live:", id="live", marks=[pytest.mark.slow, pytest.mark.harness, pytest.mark.sandbox])],
)
def test_grpo_step_on_claude_code_episodes_with_subagents_compactions_and_retries(source: str, tiny_path: Path, tmp_path: Path) -> None:
    from clawgym_env.task import load_suite

    cfg = make_config(tmp_path, harness="claude-code", pairs_per_step=1, num_generations=2, temperature=1.0)
    trainer = TreeGRPOTrainer(cfg, tiny_path)
    task = load_suite(SUITE).get("hello-file")
    episodes = []
    for name in ("claude-code-long", "claude-code-long-wrong"):
        raw, score = captured(source + name)
        calls = scored(trainer.model, shrink_spans(raw, 32))
        episodes.append(
            EpisodeResult(
                session_id=calls[0].session_id, task_id=task.full_id, harness="claude-code", status="completed", score=score, calls=calls
            )
        )
    filters = tree_filters(drop_retries=cfg.drop_retries, max_leaves=cfg.max_leaves, exclude_subagents=cfg.exclude_subagents)
    batch = build_batch([(task, "claude-code", episodes)], filters=filters, policy_version=0)
    [group] = batch.groups
    assert group.rewards == {episodes[0].session_id: 1.0, episodes[1].session_id: 0.0}
    assert group.tree is not None
    kinds = {(i.ref.episode_id, i.kind) for i in group.tree.calls.values() if i.trainable}
    assert kinds == {(e.session_id, k) for e in episodes for k in ("main", "subagent", "compaction", "retry")}
    assert batch.metrics["calls_subagent"] == 8 and batch.metrics["calls_compaction"] == 2 == batch.metrics["calls_retry"]
    assert batch.metrics["foreign_calls/claude-code"] == 0 and batch.metrics["dropped/dead"] == 2  # the failed calls
    before = [p.detach().clone() for p in trainer.policy.parameters()]
    metrics = trainer.train_step(batch)
    assert metrics["policy_version"] == 1.0 and metrics["grad_norm"] > 0
    assert metrics["mismatch/claude-code"] < 1e-4  # the scored ids are the policy's: ratio 1 at the step
    assert any(not torch.equal(a, b) for a, b in zip(before, trainer.policy.parameters(), strict=True))
    assert metrics["calls_subagent"] == 8  # the step logs the rollout's counts


def test_excluded_kinds_and_foreign_calls_are_left_out_and_logged() -> None:
    from clawgym_env.task import load_suite

    task = load_suite(SUITE).get("hello-file")
    episodes = []
    for name in ("claude-code-long", "claude-code-foreign"):
        calls = [c.model_copy(update={"token_source": "sampled"}) for c in load_calls(GOLDEN / name / "capture.jsonl.gz")]
        episodes.append(
            EpisodeResult(
                session_id=calls[0].session_id,
                task_id=task.full_id,
                harness="claude-code",
                status="completed",
                score=float(name == "claude-code-long"),
                calls=calls,
            )
        )
    batch = build_batch(
        [(task, "claude-code", episodes)],
        policy_version=0,
        filters=tree_filters(drop_retries=True, max_leaves=None, exclude_subagents=True),
    )
    [group] = batch.groups
    assert group.tree is not None
    assert {i.kind for i in group.tree.calls.values()} == {"main", "retry"}
    m = batch.metrics
    assert m["dropped/kind:subagent"] == 6 and m["dropped/kind:compaction"] == 1 and m["dropped/kind:foreign"] == 2
    assert m["foreign_calls"] == 2 == m["calls_foreign"] and m["calls_main"] == 10
