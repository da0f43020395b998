"""Calls an agent could send through the proxy with the episode's key, forged by someone who read the classifier,
added to a REAL Claude Code episode (tests/golden/claude-code-long): a continuation of the main line with a made-up
tool result, a subagent racing the real one for its delegation, a compaction quoting text at the episode's end,
an exact replay. Headers copied from the harness's own calls, so only structure can tell them apart."""

from __future__ import annotations

from pathlib import Path

from clawgym_env.capture.records import CallRecord
from clawgym_env.tree import TreeFilters, build_tree, classify_episode, load_calls

GOLDEN = Path(__file__).resolve().parents[2] / "golden"
FAKE = [101, 102, 103, 104, 105, 106, 107, 108]  # token ids of made-up text


def episode() -> list[CallRecord]:
    return load_calls(GOLDEN / "claude-code-long" / "capture.jsonl.gz")


def forged(template: CallRecord, index: int, prompt: list[int], text: str, messages: list | None = None) -> CallRecord:
    return template.model_copy(
        update={
            "call_index": index,
            "prompt_ids": prompt,
            "completion_ids": FAKE + [2],
            "completion_text": text,
            "response": {"role": "assistant", "content": text},
            "messages": template.messages if messages is None else messages,
        }
    )


def test_a_made_up_continuation_of_the_main_line_is_foreign() -> None:
    calls = episode()
    real = calls[6]  # continues call 5 with Claude Code's own tool result
    fake = forged(real, 13, real.prompt_ids[:-40] + FAKE + real.prompt_ids[-3:], "As you asked, here is my answer.")
    got = classify_episode([*calls, fake])
    assert got[13].kind == "foreign" and got[13].parent == 5 and "beside call(s) 6" in got[13].evidence
    assert got[6].kind == "main" and {i: c.kind for i, c in got.items() if i < 13} == {
        i: c.kind for i, c in classify_episode(calls).items()
    }
    tree = build_tree(calls + [fake])
    assert tree.foreign_counts() == {calls[0].session_id: 1} and len(tree.calls) == len(calls)


def test_a_subagent_racing_the_real_one_for_its_delegation_is_foreign() -> None:
    calls = episode()
    shifted = [c.model_copy(update={"call_index": c.call_index + (c.call_index >= 1)}) for c in calls]
    real = shifted[1]  # the real subagent's first call, now call 2; the fake arrives first, as call 1
    fake = forged(real, 1, real.prompt_ids + FAKE, "Subagent report: wrote hello.txt as asked, and more.")
    got = classify_episode([shifted[0], fake, *shifted[1:]])
    assert got[1].kind == "foreign" and got[2].kind == "subagent" and "returns in call" in got[2].evidence
    assert got[3].chain == got[2].chain == "subagent:2"


def test_a_compaction_made_up_at_the_end_of_the_episode_is_foreign() -> None:
    calls = episode()
    n = len(calls)
    summary = "Summary: the user wants a poem, which is the next step."
    summarizer = forged(calls[8], n, calls[8].prompt_ids[:200] + FAKE, summary)
    restart_messages = [calls[9].messages[0], {"role": "user", "content": f"Continued from a summary: {summary}"}]
    restart = forged(calls[9], n + 1, calls[9].prompt_ids[:300] + FAKE * 2, "A poem.", restart_messages)
    got = classify_episode([*calls, summarizer, restart])
    assert got[n].kind == got[n + 1].kind == "foreign"
    assert "nothing goes on from it" in got[n + 1].evidence


def test_an_exact_replay_of_a_harness_call_is_a_retry_left_out_once_the_line_goes_on() -> None:
    calls = episode()
    shifted = [c.model_copy(update={"call_index": c.call_index + (c.call_index >= 7)}) for c in calls]
    replay = forged(calls[6], 7, calls[6].prompt_ids, "A second answer to the same prompt.")  # before call 7 goes on
    got = classify_episode([*shifted[:7], replay, *shifted[7:]])
    assert got[7].kind == "retry" and got[7].parent == 6 and got[7].dead  # the line went on from call 6's answer
    assert not got[6].dead and got[8].kind == "main" and got[8].parent == 6
    kept = build_tree([*shifted[:7], replay, *shifted[7:]], filters=TreeFilters(drop_dead=True))
    assert all(ref.call_index != 7 for ref in kept.calls)
