"""Which line of work each captured call of one episode belongs to, told from the requests themselves.

A harness's calls are not one growing conversation. Besides the main line (each call re-sends the
previous call's prompt and completion), the harnesses measured here send (docs/trees.md):

- a subagent: a new conversation, under its own system prompt, whose first turn is the prompt the
  model wrote in a delegation tool call (Claude Code's ``Agent``); Claude Code's ``fork`` type instead
  continues the main conversation beside it. Its final report returns to the line that delegated.
- a compaction: a summary request (Claude Code: the conversation plus a summary instruction;
  OpenClaw: a new conversation under a summarizer prompt), then a restart of the line from a new
  conversation that carries the summary the model wrote;
- a retry: the same prompt sent again after a failed call.

Anything else is ``foreign``: a call no behaviour of the harness explains (an agent's own command
calling the proxy with the episode's key, say). Each decision names its evidence. Nothing here reads
hints the agent could set: only token ids, the messages, and what the proxy recorded about the sender
(``meta["client"]``, ``meta["system_hash"]``). Labels in ``meta`` (``branch``/``kind``, or a truthy
``subagent``/``compaction``/``retry``) are taken as given: synthetic episodes have no messages to read.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from clawgym_env.capture.records import CallRecord
from clawgym_env.tree.node import BRANCH_KINDS, BranchKind

__all__ = ["DELEGATION_TOOLS", "CallClass", "classify_episode"]

DELEGATION_TOOLS: Mapping[str, str] = {"Agent": "prompt", "Task": "prompt"}
"""Tool name -> the argument holding the subagent's prompt (Claude Code 2.x ``Agent``, 1.x ``Task``)."""

GAP = 16
"""Tokens a continuation may hold between the end of what it shares with the earlier prompt and that call's
completion: the generation header (what it drops of the earlier prompt, such as OpenClaw's volatile context
message, may be longer)."""
_MIN_SHARED = 32  # a continuation shares the earlier call's whole prompt, or at least this many tokens of it

_MIN_TEXT = 16  # characters a summary or delegation prompt needs before its presence in a later call counts
_SUMMARY = re.compile(r"<summary>(.*?)</summary>", re.S)


@dataclass(frozen=True)
class CallClass:
    """What the classifier decided about one call, and why."""

    kind: BranchKind
    chain: str
    """Line of work: ``main``, ``subagent:<first call>``, ``foreign:<first call>``."""
    parent: int | None
    """The call this one continues or retries (None: it starts a conversation)."""
    dead: bool
    """Failed, superseded by a retry, or never continued while its line went on."""
    evidence: str


@dataclass
class _Call:
    rec: CallRecord
    prompt: bytes
    completion: bytes
    ok: bool
    text: str  # what the model wrote, whitespace collapsed
    tools: list[dict[str, Any]]
    said: str  # the conversation it was sent (user, tool and later system turns), whitespace collapsed

    @property
    def i(self) -> int:
        return self.rec.call_index


def _norm(text: str) -> str:
    return " ".join(text.split())


def _content(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return " ".join(_content(p.get("text", "")) if isinstance(p, dict) else str(p) for p in value)
    return "" if value is None else str(value)


def _view(rec: CallRecord) -> _Call:
    response = rec.response or {}
    ok = rec.error is None and rec.status < 400 and bool(rec.completion_ids)
    said = " ".join(_content(m.get("content")) for j, m in enumerate(rec.messages) if j or m.get("role") != "system")
    return _Call(
        rec,
        array("q", rec.prompt_ids or ()).tobytes(),
        array("q", rec.completion_ids or ()).tobytes(),
        ok,
        _norm(_content(response.get("content")) or rec.completion_text),
        list(response.get("tool_calls") or ()),
        _norm(said),
    )


def _tool_call(call: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    """(name, arguments) of a neutral tool call (``{"function": {"name", "arguments"}}``)."""
    fn = call.get("function") or {}
    args = fn.get("arguments")
    return str(fn.get("name", "")), args if isinstance(args, Mapping) else {}


def _lcp(a: bytes, b: bytes) -> int:
    """Tokens two id strings share from the start (binary search over C-level slice compares)."""
    lo, hi = 0, min(len(a), len(b)) // 8
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[: mid * 8] == b[: mid * 8]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _find(hay: bytes, needle: bytes, start: int = 0, end: int | None = None) -> int:
    """Token index where ``needle`` starts in ``hay`` at a token boundary, or -1."""
    at = hay.find(needle, start * 8, None if end is None else end * 8)
    while at != -1 and at % 8:
        at = hay.find(needle, at + 1, None if end is None else end * 8)
    return -1 if at == -1 else at // 8


def _continuation(b: _Call, a: _Call) -> int:
    """How deep ``b`` re-sends ``a``'s conversation with ``a``'s completion in it (token end of that completion), or 0.
    A failed ``a`` has no completion to re-send: what follows it is its retry."""
    if not a.ok:
        return 0
    m = _lcp(a.prompt, b.prompt)
    if m < min(len(a.prompt) // 8, _MIN_SHARED):  # too little of a's prompt in common: another conversation
        return 0
    n = len(a.completion) // 8
    at = _find(b.prompt, a.completion, max(0, m - GAP), m + GAP + n)
    return at + n if at != -1 else 0


def _carries(r: _Call, s: _Call) -> bool:
    """Whether ``r`` carries what call ``s`` wrote as a summary (a text-only completion): its ``<summary>`` body
    (Claude Code keeps only that) or its whole text, in r's conversation, or its exact ids in r's prompt."""
    if not s.ok or s.tools:
        return False
    body = _SUMMARY.findall(_content((s.rec.response or {}).get("content")) or s.rec.completion_text)
    texts = [t for t in [*map(_norm, body), s.text] if len(t) >= _MIN_TEXT]
    return any(t in r.said for t in texts) or (len(s.completion) >= 8 * 8 and _find(r.prompt, s.completion) != -1)


def _meta_kind(meta: Mapping[str, object]) -> BranchKind | None:
    branch = meta.get("branch") or meta.get("kind")
    if isinstance(branch, str) and branch in BRANCH_KINDS:
        return branch
    for kind in ("subagent", "compaction", "retry"):
        if meta.get(kind):
            return kind
    return None


def _meta_chain(rec: CallRecord, kind: BranchKind) -> str:
    for key in ("subagent_id", "agent_id", "branch_id"):
        if key in rec.meta:
            return f"{kind}:{rec.meta[key]}"
    return "main" if kind in ("main", "retry", "compaction") else f"{kind}:{rec.call_index}"


def classify_episode(calls: Sequence[CallRecord], delegation: Mapping[str, str] = DELEGATION_TOOLS) -> dict[int, CallClass]:
    """Kind, line of work, parent, dead flag and evidence of each call of ONE episode, keyed by call_index.

    ``delegation``: tool name -> argument holding a subagent's prompt. Calls need prompt ids.
    """
    cs = [_view(c) for c in sorted(calls, key=lambda c: c.call_index)]
    if not cs:
        return {}
    by = {c.i: c for c in cs}
    parent: dict[int, int] = {}
    same: dict[int, int] = {}
    why: dict[int, str] = {}
    seen: dict[bytes, int] = {}
    for k, b in enumerate(cs):
        if b.prompt in seen:
            same[b.i] = seen[b.prompt]
        else:
            seen[b.prompt] = b.i
            depth, best = max(((_continuation(b, a), a.i) for a in cs[:k]), default=(0, -1))
            if depth:
                parent[b.i] = best
    kids: dict[int, list[int]] = {}
    for child, a in parent.items():
        kids.setdefault(a, []).append(child)

    def returns(i: int, after: int) -> int | None:  # a later call that carries the final report of i's line
        line = sorted(_descendants(i, kids))
        last = next((by[j] for j in reversed(line) if by[j].ok and by[j].text), None)
        if last is None or len(last.text) < _MIN_TEXT:
            return None
        return next((c.i for c in cs if c.i > after and c.i not in line and last.text in c.said), None)

    roots = [c.i for c in cs if c.i not in parent and c.i not in same]
    chain: dict[int, str] = {cs[0].i: "main"}
    if cs[0].i in roots:
        why[cs[0].i] = "first call of the episode"
    kind: dict[int, BranchKind] = {}
    # subagents: a new conversation opening with a delegation prompt the model wrote earlier (one conversation each)
    delegations = [
        (d.i, name, _norm(str(args.get(delegation[name], ""))))
        for d in cs
        if d.ok
        for name, args in map(_tool_call, d.tools)
        if name in delegation
    ]
    for d, tool, text in delegations:  # each delegation starts one conversation: the one whose report returns, else
        claims = [r for r in roots[1:] if r > d and r not in chain and len(text) >= _MIN_TEXT and text in by[r].said]
        backs = {r: returns(r, r) for r in claims}
        r = next((r for r in claims if backs[r] is not None), claims[0] if claims else None)  # the first to open
        if r is not None:
            chain[r], kind[r] = f"subagent:{r}", "subagent"
            why[r] = f"starts a new conversation from the {tool} prompt of call {d}" + (
                f"; its report returns in call {backs[r]}" if backs[r] is not None else ""
            )
    # compaction: a restart carrying the summary of an earlier call, which the line goes on from while it leaves the
    # history it compacted; the summary call joins the line it compacts
    summary_of: dict[int, int] = {}
    for r in roots[1:]:
        if r in chain:
            continue
        for s in sorted((c.i for c in cs if c.i < r and c.i not in summary_of.values()), reverse=True):
            if _carries(by[r], by[s]):
                summary_of[r] = s
                break
    # chains in arrival order: continuations and retries follow their parent; restarts the line they compact
    for c in cs:
        i = c.i
        if i in chain:
            continue
        if i in same:
            chain[i] = chain[same[i]]
        elif i in parent:
            chain[i] = chain[parent[i]]
        elif i in summary_of:
            s = summary_of[i]
            if s in parent:
                compacted = chain[parent[s]]
            else:  # a summarizer conversation of its own (OpenClaw): the line last active under the restart's prompt
                sys = by[i].rec.meta.get("system_hash")
                compacted = next(
                    (
                        chain[j.i]
                        for j in reversed(cs)
                        if j.i < s
                        and j.i in chain
                        and j.i not in summary_of.values()
                        and j.rec.meta.get("system_hash") == sys
                        and not chain[j.i].startswith("foreign")
                    ),
                    "",
                )
            # the line went on without the restart: a later call was the only continuation of one of its calls
            left = not any(chain.get(parent[j]) == compacted and len(kids[parent[j]]) == 1 for j in parent if j > i and parent[j] < i)
            if compacted and left and kids.get(i):
                chain[i] = chain[s] = compacted
                kind[s] = "compaction"
                why[s] = f"its summary opens call {i}, which restarts the {compacted} conversation"
                why[i] = f"restarts the {compacted} conversation from the summary written by call {s}"
            else:
                chain[i] = f"foreign:{i}"
                why[i] = (
                    f"carries the text of call {s} but restarts no line the harness left"
                    if not (compacted and left)
                    else f"carries the text of call {s} but nothing goes on from it"
                )
        else:
            chain[i] = f"foreign:{i}"
            why[i] = "starts a conversation no earlier call explains (not the first call, no delegation prompt, no summary)"
    _siblings(cs, parent, kids, kind, chain, why, returns, delegations)
    sender = _sender_checks(cs, chain)
    out: dict[int, CallClass] = {}
    for c in cs:
        i = c.i
        hint = _meta_kind(c.rec.meta)
        if hint is not None:
            k_, ch, ev = hint, _meta_chain(c.rec, hint), f"labelled {hint} in the capture's meta"
        else:
            ch = chain[i]
            k_ = kind.get(i) or ("retry" if i in same else "subagent" if ch.startswith("subagent") else "main")
            ev = why.get(i) or _default_why(c, by, parent, same)
            if i in sender and ch.startswith("foreign"):
                ev = f"{ev}; {sender[i]}"
            elif i in sender:
                ch, ev = f"foreign:{i}", sender[i]
            if ch.startswith("foreign"):
                k_ = "foreign"
        out[i] = CallClass(kind=k_, chain=ch, parent=same.get(i, parent.get(i)), dead=False, evidence=ev)
    return _mark_dead(cs, out)


def _sender_checks(cs: Sequence[_Call], chain: Mapping[int, str]) -> dict[int, str]:
    """Calls whose headers (``meta`` from the proxy's ``client_meta``) contradict their place: another HTTP client
    than the episode's first call, or, where the harness names its subagents (Claude Code), a subagent id that does
    not fit the line (none on the main line; one per subagent, the same on all its calls)."""
    first = cs[0].rec.meta.get("client")
    named = any(c.rec.meta.get("agent_id") for c in cs)
    line_id: dict[str, str] = {}
    owner: dict[str, str] = {}
    out: dict[int, str] = {}
    for c in cs:
        client, aid, ch = c.rec.meta.get("client"), c.rec.meta.get("agent_id"), chain[c.i]
        if first is not None and client is not None and client != first:
            out[c.i] = f"sent by another HTTP client than call {cs[0].i} (headers {client} vs {first})"
        elif not named or ch.startswith("foreign"):
            continue
        elif ch == "main" and aid:
            out[c.i] = f"carries subagent id {aid} on the main conversation"
        elif ch.startswith("subagent") and not aid:
            out[c.i] = "lacks the subagent id the harness sends on every subagent call"
        elif ch.startswith("subagent") and (line_id.setdefault(ch, str(aid)) != aid or owner.setdefault(str(aid), ch) != ch):
            out[c.i] = f"subagent id {aid} belongs to another line than {ch}"
    return out


def _default_why(c: _Call, by: Mapping[int, _Call], parent: Mapping[int, int], same: Mapping[int, int]) -> str:
    if c.i in same:
        o = by[same[c.i]]
        state = f"which failed ({o.rec.status}: {(o.rec.error or 'no completion')[:60]})" if not o.ok else "which was answered"
        retry = c.rec.meta.get("retry_count")
        return f"same prompt as call {o.i}, {state}" + (f"; the client numbers it retry {retry}" if retry else "")
    a = by[parent[c.i]]
    return f"continues call {a.i}: re-sends its conversation with its completion"


def _siblings(
    cs: Sequence[_Call],
    parent: Mapping[int, int],
    kids: Mapping[int, list[int]],
    kind: dict[int, BranchKind],
    chain: dict[int, str],
    why: dict[int, str],
    returns: Any,
    delegations: Sequence[tuple[int, str, str]],
) -> None:
    """Where two calls continue one call: a fork (a delegation whose report returns), a summary request, or one
    continuation too many. A harness's line sends one continuation per call; the one the line goes on with stays,
    a competing one is foreign (and with no way to tell them apart, every competitor is)."""
    forks_of = {d for d, _, _ in delegations}
    for a, below in list(kids.items()):
        rest = [b for b in sorted(below) if kind.get(b) != "compaction"]
        if len(rest) < 2 or chain[a].startswith("foreign"):
            continue
        for b in list(rest):
            back = returns(b, b) if a in forks_of else None
            if back is not None and len(rest) > 1:
                rest.remove(b)
                name = f"subagent:{b}"
                for j in _descendants(b, kids):
                    chain[j] = name
                kind[b] = "subagent"
                why[b] = f"continues call {a} beside its main continuation: a fork of the conversation; its report returns in call {back}"
        if len(rest) < 2:
            continue
        went_on = [b for b in rest if kids.get(b)]
        keep = went_on[:1] if len(went_on) == 1 else []
        for b in rest:
            if b in keep:
                continue
            others = ", ".join(str(x) for x in rest if x != b)
            for j in _descendants(b, kids):
                chain[j] = f"foreign:{b}"
                why.setdefault(j, f"continues foreign call {b}")
            why[b] = f"a second continuation of call {a} beside call(s) {others}; the harness sends one"


def _descendants(i: int, kids: Mapping[int, list[int]]) -> list[int]:
    out, todo = [], [i]
    while todo:
        j = todo.pop()
        out.append(j)
        todo.extend(kids.get(j, ()))
    return out


def _mark_dead(cs: Sequence[_Call], out: dict[int, CallClass]) -> dict[int, CallClass]:
    """Dead: failed, or never carried by a later prompt while its line went on (a resend took its place, or the line
    went on without it). A summary is carried by its restart's text."""
    final: dict[int, CallClass] = {}
    for k, c in enumerate(cs):
        cls = out[c.i]
        later = cs[k + 1 :]
        goes_on = any(out[d.i].chain == cls.chain for d in later)
        carried = not goes_on or cls.kind == "compaction" or any(_find(d.prompt, c.completion) != -1 for d in later)
        final[c.i] = CallClass(cls.kind, cls.chain, cls.parent, not c.ok or not carried, cls.evidence)
    return final
