"""The expert on multi-step procgen tasks: one shell call per step through the real custom harness, each
sent once the previous step's output is in, then "Done."; every episode solves its task."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawgym_env._sync import run_sync


@pytest.mark.sandbox
def test_expert_runs_one_call_per_step_and_solves_each_multistep_template(tiny_path: Path) -> None:
    from transformers import AutoTokenizer

    from clawgym_env.task import load_suite
    from clawgym_env.task.procgen_multistep import TEMPLATES
    from trainers.tree_sft.expert import capture_experts, expert_steps

    suite = load_suite("procgen-multistep-train")
    tasks = [next(t for t in suite.tasks if t.id.startswith(name)) for name in TEMPLATES]
    tok = AutoTokenizer.from_pretrained(tiny_path)
    results = run_sync(capture_experts(tasks, ["custom"], tok, concurrency=3))
    assert [r.score for r in results] == [1.0] * len(tasks), [(r.task_id, r.status, r.error) for r in results]
    for task, r in zip(tasks, results, strict=True):
        steps = expert_steps(task)
        assert len(r.calls) == len(steps) + 1, (task.id, len(r.calls))
        for i, step in enumerate(steps):
            [call] = (r.calls[i].response or {})["tool_calls"]
            assert call["function"]["name"] == "bash" and call["function"]["arguments"] == {"command": step}
            assert sum(m.get("role") == "tool" for m in r.calls[i].messages) == i  # sent after i tool results
        assert r.calls[-1].completion_text.strip() == "Done." and not (r.calls[-1].response or {}).get("tool_calls")
