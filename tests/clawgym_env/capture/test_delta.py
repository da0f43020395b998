"""Capture format 2: lines store what earlier lines do not hold; readers rebuild the exact records of format 1."""

from __future__ import annotations

import gzip
import random
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clawgym_env.capture import CallRecord, CaptureWriter, read_capture
from clawgym_env.capture.delta import LineHints, PromptHint
from clawgym_env.capture.store import JSON_OPTIONS, iter_capture, parse_capture
from clawgym_env.errors import CaptureError
from clawgym_env.tree import load_calls

V1 = Path(__file__).parent / "data" / "capture_v1.jsonl"
GOLDEN = Path(__file__).parents[2] / "golden"


def exact(records: list[CallRecord]) -> list[bytes]:
    """Each record's JSON: equal bytes, not just ``==`` (which holds for 1 == 1.0 == True)."""
    return [orjson.dumps(r.__dict__, option=JSON_OPTIONS) for r in records]


def lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines()]


def test_format_1_fixture_is_still_read() -> None:
    """A capture written by the format-1 writer (committed) reads as it always did, line by line."""
    raw = V1.read_bytes().splitlines()
    assert all(b'"v"' not in x and b'"delta"' not in x for x in raw)
    out = read_capture(V1)
    assert exact(out) == exact([CallRecord.model_validate(orjson.loads(x)) for x in raw])
    assert out[1].prompt_ids == [1, 2, 3, 4, 5, 9, 8, 0, 6, 7] and out[0].response["tool_calls"][0]["function"]["arguments"] == {
        "file_path": "a.txt",
        "mode": 1.0,
        "ok": True,
    }
    assert out[2].prompt_ids is None and out[2].status == 500


def test_format_1_rewritten_as_format_2(tmp_path: Path) -> None:
    v1 = read_capture(V1)
    path = tmp_path / "v2.jsonl"
    w = CaptureWriter(path, fsync=False)
    for r in v1:
        w.write(r)
    w.close()
    got = lines(path)
    assert [x["v"] for x in got] == [2, 2, 2]
    assert "delta" not in got[0]
    # call 1's prompt is call 0's prompt + completion + [6, 7]; its messages start with call 0's (read back as the same objects)
    assert got[1]["delta"]["prompt"] == [0, 8] and got[1]["prompt_ids"] == [6, 7]
    assert got[1]["delta"]["messages"] == [0, 2] and len(got[1]["messages"]) == 2
    assert exact(read_capture(path)) == exact(v1)


@pytest.mark.parametrize("harness", ["claude-code", "openclaw"])
def test_golden_captures_round_trip_and_shrink(harness: str, tmp_path: Path) -> None:
    src = GOLDEN / harness / "capture.jsonl.gz"
    calls = load_calls(src)
    path = tmp_path / "cap.jsonl"
    w = CaptureWriter(path, fsync=False)
    for c in calls:
        w.write(c)  # no hints: found by comparing with the last line
    w.close()
    assert exact(read_capture(path)) == exact(calls)
    got = lines(path)
    for i in range(1, len(calls)):  # each prompt: a reference to the last call's ids and the new suffix only
        head = calls[i - 1].prompt_ids + calls[i - 1].completion_ids
        shared = next((k for k, (x, y) in enumerate(zip(calls[i].prompt_ids, head)) if x != y), len(head))
        assert shared > len(calls[i - 1].prompt_ids) // 2
        assert got[i]["delta"]["prompt"] == [i - 1, shared]
        assert got[i]["prompt_ids"] == calls[i].prompt_ids[shared:]
    assert path.stat().st_size < 0.6 * len(gzip.decompress(src.read_bytes()))


def test_prompt_builder_hints_give_the_same_lines_for_free(tmp_path: Path) -> None:
    """The proxy's own path: the builder says which earlier prompt list a prompt's ids were copied from."""
    from transformers import AutoTokenizer

    from clawgym_env.models.smollm2 import default_model_path
    from clawgym_env.proxy._tito import PromptBuilder

    calls = load_calls(GOLDEN / "claude-code" / "capture.jsonl.gz")
    pb = PromptBuilder(AutoTokenizer.from_pretrained(default_model_path()))
    path = tmp_path / "cap.jsonl"
    w = CaptureWriter(path, fsync=False)
    built = []
    hinted = 0
    for c in calls:
        ids, _ = pb.build(c.messages, c.tools)
        assert ids == c.prompt_ids
        hint = pb.last_hint
        hinted += hint is not None
        rec = c.model_copy(update={"prompt_ids": ids})
        w.write(rec, LineHints(prompt=hint))
        built.append(rec)
        pb.remember(c.messages, c.tools, ids, c.completion_ids, c.response)
    w.close()
    assert hinted >= len(calls) // 2
    assert exact(read_capture(path)) == exact(built)
    got = lines(path)
    assert sum("prompt" in x.get("delta", {}) for x in got) >= hinted


# ------------------------------------------------------------------------------------------- generated sequences
@st.composite
def call_sequences(draw: st.DrawFn) -> list[tuple[CallRecord, LineHints | None]]:
    """Calls of a session (and sometimes a second session in the same file), in write order: main agent turns
    extending the previous one, subagents interleaved, retries and branches that cut an earlier prompt short,
    fresh prompts, duplicate call indexes, and hints (true ones; some point at calls not written yet)."""
    rnd = random.Random(draw(st.integers(0, 2**32)))
    n = draw(st.integers(1, 14))
    tool_sets = [[{"name": "Write", "x": 1}], [{"name": "Write", "x": 1.0}], []]
    values: list[Any] = ["s", 1, 1.0, True, None, "é✓"]
    made: list[CallRecord] = []
    out: list[tuple[CallRecord, LineHints | None]] = []
    for i in range(n):
        session = "ep" if rnd.random() < 0.85 else "other"
        index = i if rnd.random() < 0.9 or not made else rnd.choice(made).call_index
        base = rnd.choice(made) if made and rnd.random() < 0.8 else None
        hint = None
        kind = rnd.choice(["extend", "extend", "cut", "fresh", "completion"])
        if base is None or base.prompt_ids is None or kind == "fresh":
            prompt = [rnd.randrange(50) for _ in range(rnd.randrange(0, 6))]
        elif kind == "cut":
            k = rnd.randrange(len(base.prompt_ids) + 1)
            prompt = base.prompt_ids[:k] + [rnd.randrange(50) for _ in range(rnd.randrange(3))]
            hint = PromptHint(base.prompt_ids, k)
        else:
            head = base.prompt_ids + (base.completion_ids or []) if kind == "completion" else base.prompt_ids
            prompt = head + [rnd.randrange(50) for _ in range(rnd.randrange(4))]
            hint = PromptHint(base.prompt_ids, len(base.prompt_ids))
        prompt_ids = None if rnd.random() < 0.1 else prompt
        if base is not None and rnd.random() < 0.7:
            keep = rnd.randrange(len(base.messages) + 1)
            shared = base.messages[:keep] if rnd.random() < 0.8 else [dict(m) for m in base.messages[:keep]]
        else:
            shared = []
        messages = shared + [
            {"role": rnd.choice(["user", "assistant", "tool"]), "content": rnd.choice(values)} for _ in range(rnd.randrange(3))
        ]
        tools = base.tools if base is not None and rnd.random() < 0.6 else list(rnd.choice(tool_sets))
        completion = [rnd.randrange(50) for _ in range(rnd.randrange(0, 4))] if rnd.random() < 0.9 else None
        rec = CallRecord(
            session_id=session,
            call_index=index,
            dialect="anthropic",
            messages=messages,
            tools=tools,
            prompt_ids=prompt_ids,
            completion_ids=completion,
        )
        made.append(rec)
        use_hint = hint is not None and prompt_ids is not None and rnd.random() < 0.8
        out.append((rec, LineHints(prompt=hint) if use_hint else None))
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(call_sequences(), st.booleans())
def test_generated_sequences_round_trip_exactly(
    tmp_path_factory: pytest.TempPathFactory, seq: list[tuple[CallRecord, LineHints | None]], torn: bool
) -> None:
    path = tmp_path_factory.mktemp("cap") / "cap.jsonl"
    w = CaptureWriter(path, fsync=False)
    for rec, hints in seq:
        w.write(rec, hints)
    w.close()
    records = [r for r, _ in seq]
    assert exact(read_capture(path, strict=True)) == exact(records)
    if torn and len(seq) > 1:  # a crash mid-write of the last line loses that call only
        raw = path.read_bytes()
        path.write_bytes(raw[: raw.rstrip(b"\n").rfind(b"\n") + 1 + 5])
        assert exact(read_capture(path)) == exact(records[:-1])


def test_hint_to_a_call_not_yet_written_is_not_referenced(tmp_path: Path) -> None:
    """Two calls in flight: the later one's prompt was built from the earlier one, which finishes last."""
    a = CallRecord(session_id="ep", call_index=0, dialect="anthropic", prompt_ids=[1, 2, 3], completion_ids=[4])
    b = CallRecord(session_id="ep", call_index=1, dialect="anthropic", prompt_ids=[1, 2, 3, 4, 5], completion_ids=[6])
    b.prompt_ids[:3] = a.prompt_ids[:3]
    path = tmp_path / "cap.jsonl"
    w = CaptureWriter(path, fsync=False)
    w.write(b, LineHints(prompt=PromptHint(a.prompt_ids, 3)))
    w.write(a)
    w.close()
    first, second = lines(path)
    assert "delta" not in first and first["prompt_ids"] == [1, 2, 3, 4, 5]
    assert second["delta"] == {"prompt": [1, 3]}  # the other way round: call 0 starts as call 1, written before it
    assert exact(read_capture(path)) == exact([b, a])


# ------------------------------------------------------------------------------------------- damaged files
def _v2(tmp_path: Path) -> Path:
    path = tmp_path / "cap.jsonl"
    w = CaptureWriter(path, fsync=False)
    for r in read_capture(V1):
        w.write(r)
    w.close()
    return path


def _edit(path: Path, line: int, change: Any) -> None:
    got = lines(path)
    change(got[line - 1])
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in got))


@pytest.mark.parametrize(
    ("change", "field", "why"),
    [
        (lambda x: x["delta"].update(prompt=[7, 8]), "delta.prompt", "refers to call 7 of session 'ep1', which no earlier line"),
        (lambda x: x["delta"].update(prompt=[0, 99]), "delta.prompt", "shares 99 ids with call 0, which has only 8"),
        (lambda x: x["delta"].update(prompt="0"), "delta.prompt", "not \\[call index, count\\]"),
        (lambda x: x["delta"].update(messages=[0, 5]), "delta.messages", "shares 5 messages with call 0, which has only 2"),
        (lambda x: x["delta"].update(tools="0"), "delta.tools", "not a call index"),
        (lambda x: x["delta"].update(extra=1), "delta", "not an object with keys"),
        (lambda x: x.update(v=3), "capture format 3", "is not one this clawgym reads"),
    ],
)
def test_a_bad_reference_names_file_line_and_field(tmp_path: Path, change: Any, field: str, why: str) -> None:
    path = _v2(tmp_path)
    _edit(path, 2, change)
    with pytest.raises(CaptureError, match=f"{path}: line 2: {field} .*{why}"):
        read_capture(path)


def test_a_missing_earlier_line_is_an_error_and_views_leave_out_what_they_cannot_rebuild(tmp_path: Path) -> None:
    path = _v2(tmp_path)
    raw = path.read_bytes().splitlines(keepends=True)
    cut = b"".join(raw[1:])
    with pytest.raises(CaptureError, match="line 1: delta.prompt refers to call 0"):
        parse_capture(cut, str(path))
    items = list(iter_capture(cut, "cap"))
    assert [type(r).__name__ for _, r in items] == ["LineError", "CallRecord"]
    assert items[1][1].call_index == 2  # the last call shares nothing: still read
