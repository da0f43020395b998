"""Judge verdict parsing and prompt building (pure functions)."""

from __future__ import annotations

from clawgym_env.task.judge import build_judge_messages, parse_verdict
from clawgym_env.task.spec import RubricItem

ITEM = RubricItem(criterion="Names the top supplier", options={"yes": 1.0, "partial": 0.5, "no": 0.0})


def test_parses_json_verdict_and_keeps_reasoning() -> None:
    v = parse_verdict('Sure.\n{"reasoning": "It names Acme.", "verdict": "Yes"}', ITEM)
    assert v.score == 1.0 and v.verdict == "yes" and v.reasoning == "It names Acme." and v.error is None


def test_last_json_object_wins_and_think_blocks_are_ignored() -> None:
    text = '<think>{"verdict": "yes"}</think>{"reasoning": "a", "verdict": "no"} {"reasoning": "b", "verdict": "partial"}'
    v = parse_verdict(text, ITEM)
    assert v.verdict == "partial" and v.score == 0.5 and v.reasoning == "b"


def test_unknown_label_and_garbage_score_zero_with_error() -> None:
    v = parse_verdict('{"reasoning": "meh", "verdict": "maybe"}', ITEM)
    assert v.score == 0.0 and "maybe" in (v.error or "") and v.reasoning == "meh"
    v = parse_verdict("I think it is fine", ITEM)
    assert v.score == 0.0 and "no JSON verdict" in (v.error or "")


def test_prompt_holds_task_message_files_and_labels() -> None:
    msgs = build_judge_messages(ITEM, "Find the supplier", "Acme it is", {"out.md": "# Acme", "gone.md": None})
    assert msgs[0]["role"] == "system" and msgs[1]["role"] == "user"
    body = msgs[1]["content"]
    for part in ("Find the supplier", "Acme it is", "## File out.md", "# Acme", "## File gone.md\n(missing)",
                 "Names the top supplier", '"yes", "partial", "no"'):
        assert part in body
