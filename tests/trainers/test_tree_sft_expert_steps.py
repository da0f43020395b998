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


@pytest.mark.sandbox
def test_look_first_expert_reads_the_named_file_then_acts_and_still_solves(tiny_path: Path) -> None:
    """``look_first``: a read before the reference command (``cat`` of the file the instruction names, ``ls`` when it
    names none), sent as its own call; the act follows the read's tool result and the episode still scores 1.0."""
    from transformers import AutoTokenizer

    from clawgym_env.task import load_suite
    from trainers.tree_sft.expert import capture_experts, expert_command, expert_steps, look_command

    suite = load_suite("procgen-train")
    tasks = [next(t for t in suite.tasks if t.id.startswith(name)) for name in ("copy-file", "json-field", "write-number")]
    source = next(p for p in tasks[0].workspace_dir.iterdir() if p.name.startswith("data_"))  # type: ignore[union-attr]
    assert [look_command(t) for t in tasks] == [f"cat {source.name}", "cat config.json", "ls"]
    results = run_sync(capture_experts(tasks, ["custom"], AutoTokenizer.from_pretrained(tiny_path), concurrency=3, look_first=True))
    assert [r.score for r in results] == [1.0] * len(tasks), [(r.task_id, r.status, r.error) for r in results]
    for task, r in zip(tasks, results, strict=True):
        assert expert_steps(task, look_first=True) == [look_command(task), expert_command(task)]
        assert len(r.calls) == 3
        commands = [(r.calls[i].response or {})["tool_calls"][0]["function"]["arguments"]["command"] for i in (0, 1)]
        assert commands == [look_command(task), expert_command(task)]
        read = next(m for m in r.calls[1].messages if m.get("role") == "tool")  # the act is sent after the read's output
        if task.category == "copy-file":
            assert source.read_text().split()[0] in str(read.get("content"))
