"""Routing in the capture: a small integer array per call, whose rows an earlier call of the file holds are referenced."""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import orjson
import pytest
from pydantic import ValidationError

from clawgym_env.capture import CallRecord, CaptureWriter, RoutedExperts, read_capture
from clawgym_env.capture.delta import LineHints, PromptHint
from clawgym_env.errors import CaptureError

RNG = np.random.default_rng(0)


def routed(rows: int, experts: int = 4, layers: int = 2, top_k: int = 2) -> np.ndarray:
    return RNG.integers(0, experts, size=(rows, layers, top_k))


def call(i: int, prompt: list[int], completion: list[int], experts: np.ndarray | None, num_experts: int = 4) -> CallRecord:
    routing = None if experts is None else RoutedExperts.from_array(experts, num_experts)
    return CallRecord(
        session_id="s",
        call_index=i,
        dialect="anthropic",
        prompt_ids=prompt,
        completion_ids=completion,
        logprobs=[-0.5] * len(completion),
        routing=routing,
    )


def episode() -> list[CallRecord]:
    """Call 1 extends call 0 and routed the shared tokens alike but for one row; call 2 shares nothing."""
    p0, c0 = list(range(10)), [50, 51, 52]
    r0 = routed(len(p0) + len(c0) - 1)
    p1, c1 = p0 + c0 + [60, 61], [70, 71]
    r1 = np.concatenate([r0, routed(len(p1) + len(c1) - 1 - len(r0))])
    r1[11] = (r1[11] + 1) % 4  # a completion token of call 0, routed otherwise when call 1 prefilled it
    return [call(0, p0, c0, r0), call(1, p1, c1, r1), call(2, [90, 91], [92], routed(2))]


def write(path: Path, calls: list[CallRecord]) -> list[dict]:
    """Write ``calls`` without hints (found by comparing); the lines as written."""
    w = CaptureWriter(path, fsync=False)
    for c in calls:
        w.write(c)
    w.close()
    return [orjson.loads(x) for x in path.read_bytes().splitlines()]


def test_round_trip_stores_only_rows_no_earlier_call_holds(tmp_path: Path) -> None:
    calls = episode()
    path = tmp_path / "cap.jsonl"
    got = write(path, calls)
    assert "delta" not in got[0] and got[0]["routing"]["layers"] == 2
    assert got[1]["delta"]["prompt"] == [0, 13] and got[1]["delta"]["routing"] == [0, 11]  # up to the row that differs
    assert len(base64.b64decode(got[1]["routing"]["ids"])) == (calls[1].routing.tokens - 11) * 4
    assert "routing" not in got[2].get("delta", {})
    back = read_capture(path)
    for a, b in zip(back, calls, strict=True):
        assert a.routing == b.routing and a.prompt_ids == b.prompt_ids
        assert np.array_equal(a.routing.array(), b.routing.array())


def test_hinted_writer_references_routing_too(tmp_path: Path) -> None:
    """The proxy's path: the prompt base known from building it, no comparison of histories."""
    calls = episode()[:2]
    path = tmp_path / "cap.jsonl"
    w = CaptureWriter(path, fsync=False)
    w.write(calls[0])
    w.write(calls[1], LineHints(prompt=PromptHint(calls[0].prompt_ids, 10)))
    w.close()
    line = orjson.loads(path.read_bytes().splitlines()[1])
    assert line["delta"]["prompt"] == [0, 13] and line["delta"]["routing"] == [0, 11]
    assert [r.routing for r in read_capture(path)] == [c.routing for c in calls]


def test_a_dense_call_has_no_routing_and_a_routed_one_after_it_is_whole(tmp_path: Path) -> None:
    calls = episode()
    calls[0] = calls[0].model_copy(update={"routing": None})
    path = tmp_path / "cap.jsonl"
    got = write(path, calls)
    assert "routing" not in got[0] or got[0]["routing"] is None
    assert "routing" not in got[1]["delta"] and got[1]["delta"]["prompt"] == [0, 13]
    assert [r.routing for r in read_capture(path)] == [c.routing for c in calls]


def test_more_than_256_experts_take_two_bytes(tmp_path: Path) -> None:
    experts = RNG.integers(0, 384, size=(5, 3, 8))
    c = call(0, [1, 2, 3, 4], [5, 6], experts, num_experts=384)
    assert c.routing.itemsize == 2 and c.routing.row_bytes == 48
    path = tmp_path / "cap.jsonl"
    write(path, [c])
    assert np.array_equal(read_capture(path)[0].routing.array(), experts)


def test_bad_routing_is_refused_with_the_field() -> None:
    with pytest.raises(ValidationError, match="expert index 4, but there are 4 experts"):
        RoutedExperts(layers=1, top_k=1, num_experts=4, ids=bytes([4]))
    with pytest.raises(ValidationError, match="not whole rows of 4"):
        RoutedExperts(layers=2, top_k=2, num_experts=4, ids=bytes(6))
    with pytest.raises(ValidationError, match="not base64"):
        RoutedExperts(layers=2, top_k=2, num_experts=4, ids="#not base64#")


def test_a_reference_past_the_base_rows_names_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "cap.jsonl"
    write(path, episode()[:2])
    first, second = path.read_bytes().splitlines()
    line = orjson.loads(second)
    line["delta"]["routing"] = [0, 99]
    path.write_bytes(first + b"\n" + orjson.dumps(line) + b"\n")
    with pytest.raises(CaptureError, match=r"line 2: delta.routing shares 99 routing rows with call 0, which has 12 rows"):
        read_capture(path)


def test_trusted_records_keep_their_routing() -> None:
    r = RoutedExperts.from_array(routed(3), 4)
    rec = CallRecord.trusted({"session_id": "s", "call_index": 0, "dialect": "anthropic", "routing": r})
    assert rec.routing is r and CallRecord.model_validate_json(rec.model_dump_json()).routing == r
