"""One self-contained HTML report of a results folder: tables, inline SVG plots, trajectory viewer.

Everything (CSS, JS, data) is inline, so the file can be mailed or attached to a PR. The
trajectory viewer reads each attempt's capture (captures/<session>.jsonl): the model calls, what
the harness sent since the previous call, the completion and its tool calls, token counts.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import jinja2

from clawgym_env.capture.records import CallRecord
from clawgym_env.metrics import compute_metrics
from clawgym_env.report.svg import bar_chart, hbar_chart
from clawgym_env.results import AttemptResult

__all__ = ["build_html", "load_trajectory", "write_html"]

_MAX_TEXT = 6000


def _text(content: Any) -> str:
    """Message content (str, or a list of blocks) as display text."""
    if content is None:
        return ""
    if isinstance(content, str):
        s = content
    elif isinstance(content, list):
        parts = []
        for b in content:
            if isinstance(b, dict):
                parts.append(str(b.get("text") or b.get("content") or json.dumps(b)[:500]))
            else:
                parts.append(str(b))
        s = "\n".join(parts)
    else:
        s = json.dumps(content)
    return s if len(s) <= _MAX_TEXT else s[:_MAX_TEXT] + f"\n... [{len(s) - _MAX_TEXT} more chars]"


def _message_view(m: dict[str, Any]) -> dict[str, Any]:
    tools = []
    for tc in m.get("tool_calls") or []:
        fn = tc.get("function", tc) if isinstance(tc, dict) else {}
        args = fn.get("arguments", "")
        tools.append({"name": str(fn.get("name", "?")), "arguments": _text(args if isinstance(args, str) else json.dumps(args))})
    return {"role": str(m.get("role", "?")), "content": _text(m.get("content")), "tool_calls": tools}


def load_trajectory(capture: Path) -> list[dict[str, Any]]:
    """The calls of one capture file, shaped for the viewer; a missing file gives no calls."""
    from clawgym_env.capture.store import iter_capture

    if not capture.is_file():
        return []
    calls: list[dict[str, Any]] = []
    prev: list[Any] = []
    for _, c in iter_capture(capture.read_bytes(), str(capture)):
        if not isinstance(c, CallRecord):
            calls.append({"index": len(calls), "error": "unreadable capture line"})
            continue
        msgs = c.messages
        k = 0  # messages shared with the previous call are not repeated
        while k < min(len(msgs), len(prev)) and msgs[k] == prev[k]:
            k += 1
        prev = msgs
        resp = c.response or {"role": "assistant", "content": c.completion_text}
        calls.append(
            {
                "index": c.call_index,
                "new_messages": [_message_view(m) for m in msgs[k:]],
                "shared_messages": k,
                "response": _message_view(resp),
                "prompt_tokens": len(c.prompt_ids or []),
                "completion_tokens": len(c.completion_ids or []),
                "reused_prompt_tokens": c.reused_prompt_tokens,
                "finish_reason": c.finish_reason,
                "token_source": c.token_source,
                "latency_s": round(float(c.latency_s or 0.0), 3),
                "error": c.error,
            }
        )
    return calls


def _plots(attempts: list[AttemptResult]) -> dict[str, str]:
    harnesses = sorted({a.harness for a in attempts})
    cats = sorted({a.category or "uncategorised" for a in attempts})
    by: dict[tuple[str, str], list[float]] = defaultdict(list)
    for a in attempts:
        by[(a.category or "uncategorised", a.harness)].append(a.score)
    series = {h: [sum(by[(c, h)]) / len(by[(c, h)]) if by[(c, h)] else 0.0 for c in cats] for h in harnesses}
    bins = [0] * 11
    for a in attempts:
        bins[min(10, round(a.score * 10))] += 1
    tasks = sorted({a.task_id for a in attempts})
    short = [t.split("/", 1)[-1] for t in tasks]  # the suite is in the header
    tok: dict[str, list[int]] = defaultdict(list)
    sec: dict[str, list[float]] = defaultdict(list)
    for a in attempts:
        tok[a.task_id].append(a.prompt_tokens + a.completion_tokens)
        sec[a.task_id].append(a.timings.get("total", 0.0))
    return {
        "score_by_category": bar_chart(cats, series, ymax=1.0, title="mean score per category and harness"),
        "score_hist": bar_chart(
            [f"{i / 10:.1f}" for i in range(11)],
            {"attempts": [float(b) for b in bins]},
            fmt=lambda v: f"{v:.0f}",
            title="score distribution",
        ),
        "tokens_per_task": hbar_chart(
            short, [sum(tok[t]) / len(tok[t]) for t in tasks], fmt=lambda v: f"{v:,.0f}", title="mean tokens per attempt"
        ),
        "time_per_task": hbar_chart(
            short, [sum(sec[t]) / len(sec[t]) for t in tasks], fmt=lambda v: f"{v:.1f}s", title="mean seconds per attempt"
        ),
    }


def build_html(out_dir: Path) -> str:
    """Render the report of a results folder to a string."""
    from clawgym_env.runner.folder import load_attempts, load_manifest

    out_dir = Path(out_dir)
    manifest = load_manifest(out_dir)
    attempts = load_attempts(out_dir)
    metrics = compute_metrics(attempts, manifest.pass_threshold)
    trajectories = [
        {
            "id": f"{a.task_id}|{a.harness}|{a.attempt}",
            **a.model_dump(
                include={
                    "task_id",
                    "harness",
                    "attempt",
                    "status",
                    "score",
                    "subscores",
                    "error",
                    "session_id",
                    "model_calls",
                    "prompt_tokens",
                    "completion_tokens",
                    "timings",
                }
            ),
            "verifier_output": a.verifier_output[-_MAX_TEXT:],
            "calls": load_trajectory(out_dir / "captures" / f"{a.session_id}.jsonl") if a.session_id else [],
        }
        for a in attempts
    ]
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).parent),  # *.j2 ships as package data
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
    )
    data = json.dumps(trajectories).replace("</", "<\\/")
    return env.get_template("report.html.j2").render(
        manifest=manifest,
        metrics=metrics.to_dict(),
        ks=metrics.ks,
        attempts=attempts,
        plots=_plots(attempts),
        data_json=data,
        pass_rule=f"score >= {manifest.pass_threshold:g}",
    )


def write_html(out_dir: Path, html_path: Path | None = None) -> Path:
    """Write the report (default ``<out_dir>/report.html``) and return its path."""
    path = Path(html_path) if html_path else Path(out_dir) / "report.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(build_html(Path(out_dir)), encoding="utf-8")
    return path
