"""What the pages show, computed from stored rows; shared by the live server and the static export."""

from __future__ import annotations

import json
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from leaderboard.store import Store, SubmissionRow

__all__ = ["board_rows", "render"]

_env = Environment(loader=PackageLoader("leaderboard", "templates"), autoescape=select_autoescape(["html"]))
_env.filters["pct"] = lambda v: "–" if v is None else f"{100 * float(v):.1f}"


def render(template: str, *, static: bool = False, **ctx: Any) -> str:
    """Render a page; ``static`` makes links relative file names for the exported site."""
    return _env.get_template(template).render(static=static, **ctx)


def board_rows(subs: list[SubmissionRow]) -> list[dict[str, Any]]:
    """One row per (submission, harness), ranked by Pass@1 then mean score."""
    rows = []
    for sub in subs:
        per_h = sub.metrics.get("per_harness", {})
        for harness, g in per_h.items():
            cats = _per_category(sub, harness)
            rows.append({
                "id": sub.id, "model": sub.model, "harness": harness,
                "version": sub.harnesses.get(harness, ""),
                "pass1": g["pass_at"].get("1"),
                "passk": g["pass_at"].get(str(sub.attempts_per_task)) if sub.attempts_per_task > 1 else None,
                "k": sub.attempts_per_task, "mean": g["mean_score"], "attempts": g["attempts"],
                "date": sub.created_at[:10], "captures": sub.has_captures,
                "evaluation_only": sub.evaluation_only, "categories": json.dumps(cats),
            })
    rows.sort(key=lambda r: (-(r["pass1"] or 0.0), -r["mean"]))
    for i, r in enumerate(rows, 1):
        r["rank"] = i
    return rows


def _per_category(sub: SubmissionRow, harness: str) -> dict[str, float]:
    """Pass rate per category for one harness of a submission, from its attempt rows."""
    tot: dict[str, list[int]] = {}
    for a in sub.attempts:
        if a.harness == harness:
            t = tot.setdefault(a.category or "uncategorised", [0, 0])
            t[0] += int(a.passed)
            t[1] += 1
    return {c: p / n for c, (p, n) in sorted(tot.items())}


def board_context(store: Store, suite: str) -> dict[str, Any]:
    rows = board_rows(store.submissions(suite))
    harnesses = sorted({r["harness"] for r in rows})
    categories = sorted({c for r in rows for c in json.loads(r["categories"])})
    return {"suite": suite, "rows": rows, "harnesses": harnesses, "categories": categories,
            "plot": _plot(rows, harnesses)}


def _plot(rows: list[dict[str, Any]], harnesses: list[str]) -> dict[str, Any]:
    """Bars of Pass@1 per model, one colour per harness (inline SVG geometry)."""
    models = sorted({r["model"] for r in rows})
    palette = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948"]
    bw, gap, h = 18, 14, 160
    bars, x = [], 40
    for m in models:
        for j, hn in enumerate(harnesses):
            best = max((r["pass1"] or 0.0 for r in rows if r["model"] == m and r["harness"] == hn), default=None)
            if best is not None:
                bars.append({"x": x, "y": 10 + h * (1 - best), "h": h * best, "color": palette[j % len(palette)],
                             "label": f"{m} / {hn}: {100 * best:.1f}%", "harness": hn})
            x += bw
        x += gap
    return {"bars": bars, "width": max(x + 20, 200), "height": h + 40, "bw": bw,
            "legend": [(hn, palette[j % len(palette)]) for j, hn in enumerate(harnesses)],
            "models": [(m, 40 + i * (len(harnesses) * bw + gap)) for i, m in enumerate(models)]}
