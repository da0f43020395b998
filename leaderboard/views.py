"""What the pages show, computed from stored rows; shared by the live server and the static export.

Ranks are competition ranks ("1, 1, 3"): rows equal on the ranked figure and the mean score
tie. Each suite version is ranked on its own; a category filter re-ranks by that category's
pass rate and the column header says so.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from leaderboard.store import Store, SubmissionRow, SuiteRow

__all__ = ["BoardQuery", "board_context", "board_rows", "compare_rows", "rank_rows", "render"]

_env = Environment(loader=PackageLoader("leaderboard", "templates"), autoescape=select_autoescape(["html"]))
_env.filters["pct"] = lambda v: "–" if v is None else f"{100 * float(v):.1f}"
_env.filters["as_json"] = lambda v: json.dumps(v, ensure_ascii=False, default=str)
"""Readable JSON (``tojson`` writes & as \\u0026 for script contexts; autoescape makes this one safe in HTML)."""
_env.filters["attr_json"] = lambda v: Markup.escape(json.dumps(v, ensure_ascii=False))

SORTABLE = {
    "rank": "rank",
    "model": "model",
    "harness": "harness",
    "pass": "metric",
    "passk": "passk",
    "mean": "mean",
    "attempts": "attempts",
    "date": "date",
}
"""URL sort key -> row field."""


def render(template: str, *, static: bool = False, **ctx: Any) -> str:
    """Render a page; ``static`` makes links relative file names for the exported site."""
    return _env.get_template(template).render(static=static, **ctx)


@dataclass
class BoardQuery:
    """What a reader asked of a board page (all optional; the page links carry it along)."""

    version: str = ""
    harness: str = ""
    category: str = ""
    trust: str = ""
    q: str = ""
    sort: str = "rank"
    order: str = ""
    page: int = 1
    per_page: int = 25

    def link(self, **change: Any) -> str:
        """Query string of this view with some parameters changed (page back to 1 unless given)."""
        from urllib.parse import urlencode

        values = {**self.__dict__, "page": 1, **change}
        keep = {
            k: v
            for k, v in values.items()
            if v not in ("", None)
            and not (k == "page" and v == 1)
            and not (k == "per_page" and v == 25)
            and not (k == "sort" and v == "rank")
        }
        return "?" + urlencode(keep) if keep else "?"


def board_rows(subs: list[SubmissionRow], category: str = "") -> list[dict[str, Any]]:
    """One row per (submission, harness), ranked within each suite version."""
    rows = []
    for sub in subs:
        for harness, g in sub.metrics.get("per_harness", {}).items():
            cats = sub.metrics.get("per_harness_category", {}).get(harness, {})
            cat = cats.get(category) if category else None
            claimed = (sub.claimed_metrics or {}).get("per_harness", {}).get(harness)
            rows.append(
                {
                    "id": sub.id,
                    "model": sub.model,
                    "harness": harness,
                    "version": sub.harnesses.get(harness, ""),
                    "suite_version": sub.version,
                    "trust": sub.trust,
                    "disagreements": sub.disagreements,
                    "pass1": g["pass_at"].get("1"),
                    "claimed_pass1": claimed["pass_at"].get("1") if claimed else None,
                    "passk": g["pass_at"].get(str(sub.attempts_per_task)) if sub.attempts_per_task > 1 else None,
                    "k": sub.attempts_per_task,
                    "mean": g["mean_score"],
                    "attempts": g["attempts"],
                    "passed": g["passed"],
                    "metric": (cat["pass_rate"] if cat else None) if category else g["pass_at"].get("1"),
                    "metric_mean": (cat["mean_score"] if cat else None) if category else g["mean_score"],
                    "date": sub.created_at[:10],
                    "captures": sub.has_captures,
                    "evaluation_only": sub.evaluation_only,
                }
            )
    if category:
        rows = [r for r in rows if r["metric"] is not None]
    return rank_rows(rows)


def rank_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Competition ranks per suite version on (metric, metric_mean): equal figures share a rank (listed first come first)."""

    def key(r: dict[str, Any]) -> tuple[float, float]:
        return (-(r["metric"] or 0.0), -(r["metric_mean"] or 0.0))

    rows.sort(key=lambda r: (r["suite_version"], *key(r)))
    last: dict[str, tuple[tuple[float, float], int]] = {}
    seen: dict[str, int] = {}
    for r in rows:
        v = r["suite_version"]
        seen[v] = seen.get(v, 0) + 1
        prev = last.get(v)
        k = key(r)
        rank = prev[1] if prev and all(math.isclose(a, b, abs_tol=1e-12) for a, b in zip(prev[0], k, strict=True)) else seen[v]
        last[v] = (k, rank)
        r["rank"] = rank
    tied = {(r["suite_version"], r["rank"]) for r in rows}
    counts = {t: sum((r["suite_version"], r["rank"]) == t for r in rows) for t in tied}
    for r in rows:
        r["tied"] = counts[(r["suite_version"], r["rank"])] > 1
    return rows


def board_context(store: Store, suite: str, query: BoardQuery, *, paginate: bool = True) -> dict[str, Any]:
    """Everything board.html shows for one suite version under the reader's filters."""
    versions = store.suite_versions(suite)
    current = next((v for v in versions if v.version == query.version), versions[0] if versions else None)
    subs = store.submissions(suite, current.content_hash if current else None)
    rows = board_rows(subs, query.category)
    harnesses = sorted({r["harness"] for r in board_rows(subs)})
    categories = sorted(set(current.categories.values()) if current else set())
    if query.harness:
        rows = [r for r in rows if r["harness"] == query.harness]
    if query.trust:
        rows = [r for r in rows if r["trust"] == query.trust]
    if query.q:
        rows = [r for r in rows if query.q.lower() in r["model"].lower()]
    field = SORTABLE.get(query.sort, "rank")
    descending = query.order == "desc" if query.order else field in ("metric", "passk", "mean", "attempts", "date")
    present = [r for r in rows if r[field] is not None]
    present.sort(key=lambda r: (r[field], -r["rank"]) if descending else (r[field], r["rank"]), reverse=descending)
    rows = present + [r for r in rows if r[field] is None]
    per_page = max(1, min(query.per_page, 200))
    pages = max(1, math.ceil(len(rows) / per_page)) if paginate else 1
    page = min(max(1, query.page), pages)
    shown = rows[(page - 1) * per_page : page * per_page] if paginate else rows
    metric_label = f"{query.category} pass rate %" if query.category else "Pass@1 %"
    return {
        "suite": suite,
        "rows": shown,
        "total": len(rows),
        "page": page,
        "pages": pages,
        "query": query,
        "versions": versions,
        "current": current,
        "harnesses": harnesses,
        "categories": categories,
        "metric_label": metric_label,
        "sort_field": query.sort,
        "descending": descending,
        "plot": _plot(shown, metric_label),
    }


def _plot(rows: list[dict[str, Any]], label: str) -> dict[str, Any]:
    """Horizontal bars, one line per shown row: labels sit on their own line and cannot overlap."""
    line, left, width = 22, 260, 360
    bars = []
    for i, r in enumerate(rows[:30]):
        value = r["metric"] or 0.0
        name = f"{r['model']} / {r['harness']}"
        bars.append(
            {
                "y": 8 + i * line,
                "w": max(1.0, width * value),
                "value": f"{100 * value:.1f}%",
                "title": name,
                "label": name if len(name) <= 38 else name[:37] + "…",
            }
        )
    return {"bars": bars, "left": left, "width": width, "height": 16 + line * len(bars), "label": label}


def compare_rows(a: SubmissionRow, b: SubmissionRow) -> list[dict[str, Any]]:
    """Per (task, harness): each submission's passes and mean score, and which did better."""

    def per_task(sub: SubmissionRow) -> dict[tuple[str, str], dict[str, Any]]:
        out: dict[tuple[str, str], dict[str, Any]] = {}
        for t in sub.attempts:
            cell = out.setdefault((t.task_id, t.harness), {"passed": 0, "n": 0, "total": 0.0, "category": t.category})
            cell["passed"] += int(t.passed)
            cell["n"] += 1
            cell["total"] += t.score
        for cell in out.values():
            cell["mean"] = cell["total"] / cell["n"]
        return out

    pa, pb = per_task(a), per_task(b)
    rows = []
    for key in sorted(set(pa) | set(pb)):
        ca, cb = pa.get(key), pb.get(key)
        delta = (cb["mean"] - ca["mean"]) if ca and cb else None
        better = "" if delta is None or abs(delta) < 1e-9 else ("b" if delta > 0 else "a")
        rows.append(
            {
                "task": key[0],
                "harness": key[1],
                "category": (ca or cb or {}).get("category", ""),
                "a": ca,
                "b": cb,
                "delta": delta,
                "better": better,
            }
        )
    return rows


def version_label(row: SuiteRow) -> str:
    return f"{row.version} ({row.registered_at[:10]})" if row.registered_at else row.version


_env.filters["version_label"] = version_label
