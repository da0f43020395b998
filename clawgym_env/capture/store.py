"""Append-only JSONL capture of one episode: one CallRecord per line.

Each line is serialised as soon as its call ends and handed to the OS either at once (``write``)
or by the capture thread a moment later (``append_soon``, the proxy's path: a Claude Code record is
~100 kB, and writing it on the event loop was the largest single cost of a proxied call), then
fsynced off the event loop, so a crash loses at most the calls of the last few milliseconds.
The reader tolerates a torn last line, which is exactly what such a crash leaves behind.

One daemon thread per process writes and fsyncs for every writer: the event loop only appends
to a list and puts the writer on a queue (no executor future, no loop wake-up per call), and
writers queued while an fsync runs share the next round.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import queue
import threading
from pathlib import Path
from typing import Any

import orjson

from clawgym_env.capture.records import CallRecord
from clawgym_env.errors import CaptureError

__all__ = ["JSON_OPTIONS", "CaptureWriter", "read_capture"]

JSON_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
"""How a capture line is encoded; a value spliced into a line as ``orjson.Fragment`` must be encoded so too."""


class _Syncer:
    """The process's capture thread: writes pending lines and fsyncs each queued writer once per round."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[CaptureWriter] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def submit(self, writer: CaptureWriter) -> None:
        if self._thread is None:
            with self._start_lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="clawgym-capture", daemon=True)
                    self._thread.start()
        self._queue.put(writer)

    def _run(self) -> None:
        while True:
            self.flush(self._queue.get())

    def flush(self, first: CaptureWriter | None = None) -> None:
        """Sync ``first`` and every writer queued now (also at interpreter exit: daemon threads just stop)."""
        batch = {} if first is None else {id(first): first}
        while True:
            try:
                w = self._queue.get_nowait()
            except queue.Empty:
                break
            batch[id(w)] = w
        for w in batch.values():
            w._queued = False
            try:
                w.sync()
            except (OSError, ValueError):  # closed under us: close() synced already
                pass


_SYNCER = _Syncer()
atexit.register(_SYNCER.flush)


class CaptureWriter:
    """Appends call records to ``path``; one writer per session, opened lazily, closed idempotently."""

    def __init__(self, path: Path, *, fsync: bool = True) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "ab", buffering=0)  # noqa: SIM115 - lives as long as the session
        self._closed = False
        self._queued = False  # on the capture thread's queue
        self._pending: list[bytes] = []
        self._lock = threading.Lock()  # the file is appended from the loop and from worker threads

    @staticmethod
    def _line(record: CallRecord | dict[str, Any]) -> bytes:
        data = record if isinstance(record, dict) else record.__dict__
        return orjson.dumps(data, option=JSON_OPTIONS) + b"\n"

    def write(self, record: CallRecord | dict[str, Any]) -> None:
        """Append one record and hand it to the OS (survives a process crash)."""
        if self._closed:
            raise CaptureError(f"capture {self.path} is closed; open a new session to record more calls")
        line = self._line(record)
        with self._lock:
            self._drain()
            self._fh.write(line)

    def append_soon(self, record: CallRecord | dict[str, Any]) -> None:
        """Serialise one record now; the capture thread writes and fsyncs it within milliseconds."""
        if self._closed:
            raise CaptureError(f"capture {self.path} is closed; open a new session to record more calls")
        line = self._line(record)
        with self._lock:
            self._pending.append(line)
        self._schedule()

    def _schedule(self) -> None:
        if not self._queued:
            self._queued = True
            _SYNCER.submit(self)

    def _drain(self) -> None:
        if self._pending:
            lines, self._pending = self._pending, []
            self._fh.write(b"".join(lines))

    def sync(self) -> None:
        """Write what is pending and flush to disk (survives a machine crash)."""
        if self._closed:
            return
        with self._lock:
            self._drain()
        if self.fsync:
            os.fsync(self._fh.fileno())

    async def write_async(self, record: CallRecord | dict[str, Any]) -> None:
        """Append one record; fsync in a worker thread so the event loop keeps serving."""
        self.write(record)
        if self.fsync:
            await asyncio.to_thread(self.sync)

    def sync_soon(self) -> None:
        """Have the capture thread write what is pending and fsync; calls arriving meanwhile share the next one."""
        if self._closed or not (self.fsync or self._pending):
            return
        self._schedule()

    def close(self) -> None:
        """Sync and close; idempotent."""
        if self._closed:
            return
        try:
            self.sync()
        finally:
            self._closed = True
            self._fh.close()


def read_capture(path: Path | str, *, strict: bool = False) -> list[CallRecord]:
    """Read a capture file. A torn last line (crash mid-write) is dropped unless ``strict``.

    Raises CaptureError for a missing file or a corrupt line that is not the last one.
    """
    p = Path(path)
    if not p.is_file():
        raise CaptureError(f"capture file {p} does not exist; check the session id or the results folder")
    raw = p.read_bytes()
    lines = raw.split(b"\n")
    records: list[CallRecord] = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        last = i >= len(lines) - 1 or not any(x.strip() for x in lines[i + 1 :])
        try:
            records.append(CallRecord.model_validate(orjson.loads(line)))
        except (orjson.JSONDecodeError, ValueError) as exc:
            if last and not strict and not raw.endswith(b"\n"):
                break
            raise CaptureError(f"{p}: line {i + 1} is not a valid CallRecord ({exc}); the file is corrupt") from exc
    return records
