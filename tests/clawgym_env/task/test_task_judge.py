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


async def test_token_level_judge_gets_prompt_ids_and_its_ids_are_decoded() -> None:
    """A token-level backend (real tiny tokenizer; the backend itself is a stand-in returning fixed ids)."""
    from transformers import AutoTokenizer

    from clawgym_env.models.testing import tiny_model_path
    from clawgym_env.proxy.backends.base import Completion, CompletionRequest, PolicyBackend
    from clawgym_env.task.judge import ask_judge

    tok = AutoTokenizer.from_pretrained(tiny_model_path())
    answer = '{"reasoning": "named", "verdict": "partial"}'
    seen: list[CompletionRequest] = []

    class IdsOnlyJudge(PolicyBackend):
        name = "ids-only"

        @property
        def tokenizer(self):  # type: ignore[no-untyped-def]
            return tok

        async def handle(self, request: CompletionRequest) -> Completion:
            seen.append(request)
            ids = tok.encode(answer, add_special_tokens=False)
            return Completion(completion_ids=ids, logprobs=[0.0] * len(ids), text=None)

    msgs = build_judge_messages(ITEM, "task", "final", {})
    verdict = await ask_judge(IdsOnlyJudge(), msgs, ITEM, session_id="j", call_index=0)
    assert verdict.verdict == "partial" and verdict.score == 0.5 and verdict.reasoning == "named"
    expected = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
    if hasattr(expected, "keys"):
        expected = expected["input_ids"]
    assert seen[0].prompt_ids == list(expected) and len(seen[0].prompt_ids) > 20
