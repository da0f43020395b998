"""Capture format 2: a call record stores only what is new since an earlier record of its file.

Why: a harness resends its whole history on every call, and each call's prompt extends the
previous call's prompt + completion, so a format-1 line repeats the earlier lines. In the golden
captures prompt ids are 53% of the bytes and messages + tools 45-46%, nearly all of both sent
before; format 2 holds them in 6-7% of the bytes (113.6 -> 6.8 kB a call for Claude Code). In
bench/proxy.py (52 kB bodies) a line shrank from 44 kB to ~600 bytes, and the proxy's system
CPU for the page-cache copy from ~40 to ~6 us a call.

A format-2 line is a CallRecord's JSON with ``"v": 2`` and, when it shares something with an
earlier record of the same file, ``"delta"``, each of whose keys is optional::

    "delta": {"prompt": [I, L], "messages": [I, K], "tools": I, "routing": [I, R]}

- ``prompt [I, L]``: prompt_ids = (base.prompt_ids + base.completion_ids)[:L] + the line's prompt_ids
- ``routing [I, R]``: routing rows = base.routing's first R rows + the line's rows (``routing.py``; only
  where the base is the prompt's, and R <= L: the tokens both calls hold, routed alike)
- ``messages [I, K]``: messages = base.messages[:K] + the line's messages
- ``tools I``: tools = base.tools (the line's tools are ``[]``)

where base is the latest earlier line of the file with call_index I and the line's session_id.
A line without ``"v"`` is format 1 (whole); so is a format-2 line without ``"delta"`` (the first
call, and any call that shares nothing with a record written before it).

Crash safety: a writer only references records it has already handed to the OS as whole lines,
so a reference always points to an earlier, complete line, and a torn last line loses only its
own call. A reference the reader cannot resolve is an error naming the file, line and field.

Cost on the proxy's hot path: no comparison of histories. Messages and tools are compared by
identity (``SharedHistory`` hands a call the previous call's objects for what it resent), and the
prompt's shared prefix comes from the prompt builder (``PromptHint``: which earlier prompt list
the new prompt's first ids were copied from, known from building it); only the base's completion
(a few hundred ids at most) is compared. Records written without hints (records read back and
written again: trainers/branching.py) are compared with the last record written: prompt ids as
lists (longest common prefix, in C), messages and tools by their JSON bytes (never ``==``, for
which 1 == 1.0 == True).

Reading: a record's shared messages are the base record's own objects, as in the proxy's records
in memory (``SharedHistory``); nothing downstream changes a record's messages in place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, NoReturn

import orjson

from clawgym_env.capture.records import JSON_OPTIONS, CallRecord
from clawgym_env.errors import CaptureError

__all__ = ["FORMAT", "DeltaReader", "DeltaWriter", "LineHints", "PromptHint"]

FORMAT = 2
"""The capture format this version writes (``"v"`` of every line); it reads formats 1 and 2."""


class PromptHint(NamedTuple):
    """``prompt_ids[:shared]`` are the first ``shared`` items of ``base`` (the same int objects): known for free
    where the prompt builder copied them from an earlier prompt list."""

    base: list[int]
    shared: int


class LineHints(NamedTuple):
    """What the proxy already has for a record's line, so that writing it costs no extra work."""

    messages_json: Sequence[Any] | None = None
    """Each message's JSON (``orjson.Fragment``), aligned with ``record.messages``."""
    tools_json: Any | None = None
    """The tool list's JSON (``orjson.Fragment``)."""
    prompt: PromptHint | None = None


class DeltaWriter:
    """One capture file's writer side: turns each record into its format-2 line, against records written before.

    ``line`` gives the dict to encode; ``written`` must follow once that line is in the file (never before:
    only whole, written lines may be referenced).
    """

    def __init__(self) -> None:
        self._latest: dict[tuple[str, int], CallRecord] = {}
        """Per (session, call index): the latest record written, the one a reference to it resolves to."""
        self._by_prompt: dict[int, CallRecord] = {}
        """id(prompt_ids) -> the written record holding that list (kept alive by the record)."""
        self._last: CallRecord | None = None

    def line(self, record: CallRecord, hints: LineHints | None = None) -> dict[str, Any]:
        """The JSON object of ``record``'s line."""
        data = record.__dict__.copy()  # then "v": a plain copy is a third of building the dict anew
        data["v"] = FORMAT
        if hints is not None:
            if hints.messages_json is not None:
                data["messages"] = hints.messages_json
            if hints.tools_json is not None:
                data["tools"] = hints.tools_json
        last = self._last
        cands = [last] if last is not None and last.session_id == record.session_id else []
        delta: dict[str, Any] = {}
        base = self._prompt_base(record, hints, cands)
        routing = record.routing
        if base is not None:
            ref, shared = base
            delta["prompt"] = [ref.call_index, shared]
            data["prompt_ids"] = record.prompt_ids[shared:]  # type: ignore[index]  # a prompt is there: shared > 0
            if ref is not last:
                cands.insert(0, ref)
            if routing is not None and ref.routing is not None and (rows := routing.shared_rows(ref.routing, shared)):
                delta["routing"] = [ref.call_index, rows]
                data["routing"] = routing.line_json(rows)
        if routing is not None and "routing" not in delta:
            data["routing"] = routing.line_json()
        # without hints, records from elsewhere: equal JSON, not the same objects
        best, k = None, 0
        msgs = record.messages
        for cand in cands:
            theirs = cand.messages
            n = min(len(msgs), len(theirs))
            j = 0
            while j < n and (msgs[j] is theirs[j] or (hints is None and _same(msgs[j], theirs[j]))):
                j += 1
            if j > k:
                best, k = cand, j
        if best is not None:
            delta["messages"] = [best.call_index, k]
            data["messages"] = data["messages"][k:]
        tools = record.tools
        if tools:
            for cand in cands:
                if cand.tools is tools or (hints is None and _same(cand.tools, tools)):
                    delta["tools"] = cand.call_index
                    data["tools"] = []
                    break
        if delta:
            data["delta"] = delta
        return data

    def written(self, record: CallRecord) -> None:
        """``record``'s line is in the file: later lines may reference it."""
        key = (record.session_id, record.call_index)
        old = self._latest.get(key)
        if old is not None and old.prompt_ids is not None:
            self._by_prompt.pop(id(old.prompt_ids), None)
        self._latest[key] = record
        if record.prompt_ids is not None:
            self._by_prompt[id(record.prompt_ids)] = record
        self._last = record

    def _current(self, rec: CallRecord) -> bool:
        """Whether a reference to ``rec``'s call index resolves to ``rec`` (no later record of that index)."""
        return self._latest.get((rec.session_id, rec.call_index)) is rec

    def _prompt_base(self, record: CallRecord, hints: LineHints | None, cands: list[CallRecord]) -> tuple[CallRecord, int] | None:
        """The record whose prompt + completion ``record``'s prompt starts with, and how many ids they share."""
        prompt = record.prompt_ids
        if not prompt:
            return None
        if hints is None:  # records from elsewhere: compared with the last record written
            if not cands or not cands[0].prompt_ids:
                return None
            base = cands[0]
            shared = _common_prefix(prompt, base.prompt_ids + (base.completion_ids or []))  # type: ignore[operator]  # checked non-empty just above
            return (base, shared) if shared else None
        hint = hints.prompt
        if hint is None or not hint.shared:
            return None
        known = self._by_prompt.get(id(hint.base))
        if known is None or known.prompt_ids is not hint.base or known.session_id != record.session_id or not self._current(known):
            return None  # not written yet (calls in flight at once): this line holds its prompt whole
        shared = hint.shared
        done = known.completion_ids
        if done and shared == len(hint.base) and prompt[shared : shared + len(done)] == done:
            shared += len(done)  # the prompt goes on with the base's completion (spliced by id)
        return known, shared


def _common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix (list compares in C; O(len) in all)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo] and a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def _same(a: Any, b: Any) -> bool:
    """Equal JSON: not ``==``, for which 1 == 1.0 == True."""
    return a is b or orjson.dumps(a, option=JSON_OPTIONS) == orjson.dumps(b, option=JSON_OPTIONS)


class DeltaReader:
    """One capture file's reader side: resolves each line's references against the records read before it."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._latest: dict[tuple[str, int], CallRecord] = {}

    def record(self, data: dict[str, Any], line_no: int) -> CallRecord:
        """The whole CallRecord of one decoded line (``data`` is consumed)."""
        version = data.pop("v", 1)
        delta = data.pop("delta", None) if version == FORMAT else None
        if version not in (1, FORMAT):
            raise CaptureError(
                f"{self.source}: line {line_no}: capture format {version!r} is not one this clawgym "
                f"reads (1 or {FORMAT}); read it with the clawgym version that wrote it"
            )
        rec = CallRecord.model_validate(data)
        if delta is not None:
            self._resolve(rec, delta, line_no)
        self._latest[(rec.session_id, rec.call_index)] = rec
        return rec

    def _resolve(self, rec: CallRecord, delta: Any, line_no: int) -> None:
        if not isinstance(delta, dict) or set(delta) - {"prompt", "messages", "tools", "routing"}:
            self._fail(line_no, "delta", f"is {delta!r}, not an object with keys prompt, messages, tools, routing")
        if "prompt" in delta:
            base, n = self._ref(rec, delta["prompt"], line_no, "delta.prompt")
            if base.prompt_ids is None:
                self._fail(line_no, "delta.prompt", f"refers to call {base.call_index}, which has no prompt_ids")
            seq = base.prompt_ids + (base.completion_ids or [])
            if n > len(seq):
                self._fail(line_no, "delta.prompt", f"shares {n} ids with call {base.call_index}, which has only {len(seq)}")
            rec.prompt_ids = seq[:n] + (rec.prompt_ids or [])
        if "messages" in delta:
            base, n = self._ref(rec, delta["messages"], line_no, "delta.messages")
            if n > len(base.messages):
                self._fail(
                    line_no, "delta.messages", f"shares {n} messages with call {base.call_index}, which has only {len(base.messages)}"
                )
            rec.messages = base.messages[:n] + rec.messages
        if "routing" in delta:
            base, n = self._ref(rec, delta["routing"], line_no, "delta.routing")
            if rec.routing is None or base.routing is None or n > base.routing.tokens:
                self._fail(
                    line_no,
                    "delta.routing",
                    f"shares {n} routing rows with call {base.call_index}, which has {base.routing.tokens if base.routing else 'no'} rows",
                )
            try:
                rec.routing = base.routing.head(n).extended(rec.routing)
            except ValueError as exc:
                self._fail(line_no, "delta.routing", str(exc))
        if "tools" in delta:
            if type(delta["tools"]) is not int:
                self._fail(line_no, "delta.tools", f"is {delta['tools']!r}, not a call index")
            base, _ = self._ref(rec, [delta["tools"], 0], line_no, "delta.tools")
            rec.tools = base.tools

    def _ref(self, rec: CallRecord, ref: Any, line_no: int, field: str) -> tuple[CallRecord, int]:
        if not (isinstance(ref, list) and len(ref) == 2 and all(type(x) is int and x >= 0 for x in ref)):
            self._fail(line_no, field, f"is {ref!r}, not [call index, count] of two ints >= 0")
        base = self._latest.get((rec.session_id, ref[0]))
        if base is None:
            self._fail(line_no, field, f"refers to call {ref[0]} of session {rec.session_id!r}, which no earlier line holds")
        return base, ref[1]

    def _fail(self, line_no: int, field: str, why: str) -> NoReturn:
        raise CaptureError(
            f"{self.source}: line {line_no}: {field} {why}; the file is corrupt (a format-2 line "
            f"needs the earlier lines it refers to: do not cut, reorder or filter lines)"
        )
