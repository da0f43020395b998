"""Capture store: append-only JSONL, one record per line, torn last line tolerated."""

from __future__ import annotations

import os
import time

import pytest

from clawgym_env.capture import CallRecord, CaptureWriter, read_capture, store
from clawgym_env.errors import CaptureError


def rec(i: int) -> CallRecord:
    return CallRecord(
        session_id="ep",
        call_index=i,
        dialect="anthropic",
        prompt_ids=[1, 2, i],
        completion_ids=[7, i],
        logprobs=[-0.25, -1.5],
        messages=[{"role": "user", "content": "hé ✓"}],
    )


def test_round_trip_appends_and_reopens(tmp_path) -> None:
    path = tmp_path / "caps" / "ep.jsonl"
    w = CaptureWriter(path)
    w.write(rec(0))
    w.write(rec(1))
    w.close()
    w.close()  # idempotent
    w2 = CaptureWriter(path)  # a reopened writer appends, never truncates
    w2.write(rec(2))
    w2.close()
    out = read_capture(path)
    assert [r.call_index for r in out] == [0, 1, 2]
    assert out[1] == rec(1)
    with pytest.raises(CaptureError, match="closed"):
        w2.write(rec(3))


def test_each_write_is_visible_before_close(tmp_path) -> None:
    path = tmp_path / "ep.jsonl"
    w = CaptureWriter(path, fsync=False)
    w.write(rec(0))
    assert [r.call_index for r in read_capture(path)] == [0]  # a crash now loses nothing written
    w.close()


def test_torn_last_line_is_dropped_but_corruption_elsewhere_is_an_error(tmp_path) -> None:
    path = tmp_path / "ep.jsonl"
    w = CaptureWriter(path)
    w.write(rec(0))
    w.write(rec(1))
    w.close()
    good = path.read_bytes()
    path.write_bytes(good + b'{"session_id": "ep", "call_in')  # crash mid-write
    assert [r.call_index for r in read_capture(path)] == [0, 1]
    with pytest.raises(CaptureError, match="line 3"):
        read_capture(path, strict=True)
    path.write_bytes(b"garbage\n" + good)
    with pytest.raises(CaptureError, match="line 1"):
        read_capture(path)
    with pytest.raises(CaptureError, match="does not exist"):
        read_capture(tmp_path / "missing.jsonl")


async def test_async_write_fsyncs_off_loop(tmp_path) -> None:
    w = CaptureWriter(tmp_path / "ep.jsonl")
    await w.write_async(rec(5))
    w.close()
    assert read_capture(tmp_path / "ep.jsonl")[0].completion_ids == [7, 5]


async def test_sync_soon_coalesces_and_close_is_safe(tmp_path) -> None:
    w = CaptureWriter(tmp_path / "ep.jsonl")
    for i in range(5):
        w.write(rec(i))
        w.sync_soon()  # at most one fsync in flight; the rest share the next one
    w.close()  # may race the in-flight fsync: must not raise
    assert [r.call_index for r in read_capture(tmp_path / "ep.jsonl")] == [0, 1, 2, 3, 4]


def test_sync_soon_fsyncs_later_once_for_the_writes_meanwhile(tmp_path, monkeypatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(store.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    monkeypatch.setattr(store, "FSYNC_INTERVAL_S", 0.3)
    w = CaptureWriter(tmp_path / "ep.jsonl")
    fd = w._fh.fileno()
    for i in range(5):
        w.write(rec(i))
        w.sync_soon()
    assert [r.call_index for r in read_capture(tmp_path / "ep.jsonl")] == [0, 1, 2, 3, 4]  # with the OS already
    deadline = time.monotonic() + 10
    while fd not in synced and time.monotonic() < deadline:  # no close(): the fsync thread's round
        time.sleep(0.01)
    assert 1 <= synced.count(fd) < 5  # one fsync served several writes
    w.close()
    assert synced.count(fd) >= 2  # close syncs at once
