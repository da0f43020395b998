"""Append-only JSONL capture of one episode: one CallRecord per line (format 2: ``capture/delta.py``).

Each line is serialised and handed to the OS (``write``) as soon as its call ends, so a crash
of this process loses nothing recorded. ``fsync`` (which only a machine crash needs) runs in one
daemon thread per process: ``sync_soon`` queues a writer, and the thread syncs every queued writer
``FSYNC_INTERVAL_S`` later, once for all the lines written meanwhile; ``close`` syncs at once. A
run records an attempt as finished only after its capture is closed, and resume deletes the
capture of an unfinished one, so a machine crash never leaves a finished attempt with a short
capture. The reader tolerates a torn last line, which is what a crash mid-write leaves behind. A line
stores only what is new since an earlier line (format 2, ``delta.py``), and only ever refers to a
line written before it, so a torn last line still loses only its own call.

Why this shape (bench/proxy.py, 64 streams): a thread that wrote and fsynced each line took the
GIL back after each of its syscalls, so the event loop blocked on it (1,174 times in 5,120 calls;
an ``os.urandom`` on the loop took ~300 us instead of 4 under load), and each fsync cost a virtio
round trip. Writing on the loop costs the page-cache copy (~30 us for a 44 kB record); the loop
now waits for the fsync thread about once per fsync, at most once per writer per interval.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import queue
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import orjson

from clawgym_env.capture.delta import DeltaReader, DeltaWriter, LineHints
from clawgym_env.capture.records import JSON_OPTIONS, CallRecord
from clawgym_env.errors import CaptureError

__all__ = ["FSYNC_INTERVAL_S", "JSON_OPTIONS", "CaptureWriter", "iter_capture", "parse_capture", "read_capture"]


_LINE_OPTIONS = JSON_OPTIONS | orjson.OPT_APPEND_NEWLINE

FSYNC_INTERVAL_S = 1.0
"""How long a written line may wait for its fsync: every queued writer is synced once per interval."""


class _Syncer:
    """The process's fsync thread: each round waits FSYNC_INTERVAL_S, then syncs every writer queued by then."""

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
            first = self._queue.get()
            time.sleep(FSYNC_INTERVAL_S)  # writers queued meanwhile share this round
            self.flush(first)

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
        self._queued = False  # on the fsync thread's queue
        self._lock = threading.Lock()  # written on the loop, synced and closed from other threads
        self._delta = DeltaWriter()

    def write(self, record: CallRecord, hints: LineHints | None = None) -> None:
        """Append one record and hand it to the OS (survives a crash of this process).

        ``hints``: what the caller has already (each message's JSON, where the prompt's ids came from), so the
        line costs no comparison of histories; without them the line is the same, found by comparing.
        """
        with self._lock:
            if self._closed:
                raise CaptureError(f"capture {self.path} is closed; open a new session to record more calls")
            # the newline appended by orjson: no copy of the line
            self._fh.write(orjson.dumps(self._delta.line(record, hints), option=_LINE_OPTIONS))
            self._delta.written(record)

    def sync(self) -> None:
        """Flush what was written to disk now (survives a machine crash)."""
        with self._lock:  # not held during the fsync: the loop's write() must never wait for a disk
            if self._closed or not self.fsync:
                return
            fd = self._fh.fileno()
        os.fsync(fd)

    async def write_async(self, record: CallRecord) -> None:
        """Append one record; fsync in a worker thread so the event loop keeps serving."""
        self.write(record)
        if self.fsync:
            await asyncio.to_thread(self.sync)

    def sync_soon(self) -> None:
        """Have the fsync thread sync this file within FSYNC_INTERVAL_S; writes meanwhile share that fsync."""
        if self._closed or not self.fsync or self._queued:
            return
        self._queued = True
        _SYNCER.submit(self)

    def close(self) -> None:
        """Sync and close; idempotent."""
        if self._closed:
            return
        try:
            self.sync()
        finally:
            with self._lock:
                self._closed = True
                self._fh.close()


def read_capture(path: Path | str, *, strict: bool = False) -> list[CallRecord]:
    """Read a capture file (format 1 or 2). A torn last line (crash mid-write) is dropped unless ``strict``.

    Raises CaptureError for a missing file or a corrupt line that is not the last one.
    """
    p = Path(path)
    if not p.is_file():
        raise CaptureError(f"capture file {p} does not exist; check the session id or the results folder")
    return parse_capture(p.read_bytes(), str(p), strict=strict)


def parse_capture(raw: bytes, source: str, *, strict: bool = False) -> list[CallRecord]:
    """``read_capture`` of a capture's bytes; ``source`` names it in errors."""
    records: list[CallRecord] = []
    for _, item in iter_capture(raw, source):
        if isinstance(item, CallRecord):
            records.append(item)
        elif strict or not item.torn:
            raise item
    return records


class LineError(CaptureError):
    """A capture line that gives no record; ``torn``: it is the last line and has no newline (a crash mid-write)."""

    def __init__(self, message: str, *, torn: bool) -> None:
        super().__init__(message)
        self.torn = torn


def iter_capture(raw: bytes, source: str) -> Iterator[tuple[int, CallRecord | LineError]]:
    """(line number, its record or why it gives none) for every non-blank line, going on past bad lines: a line
    that refers to a bad one is then bad too. For views of untrusted captures; ``parse_capture`` stops instead."""
    lines = raw.split(b"\n")
    last = len(lines) - 1
    while last > 0 and not lines[last].strip():
        last -= 1
    reader = DeltaReader(source)
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        torn = i == last and not raw.endswith(b"\n")
        try:
            data = orjson.loads(line)
            if not isinstance(data, dict):
                raise ValueError(f"a JSON {type(data).__name__}, not an object")
            yield i + 1, reader.record(data, i + 1)
        except CaptureError as exc:
            yield i + 1, LineError(str(exc), torn=torn)
        except (orjson.JSONDecodeError, ValueError) as exc:
            yield i + 1, LineError(f"{source}: line {i + 1} is not a valid CallRecord ({exc}); the file is corrupt", torn=torn)
