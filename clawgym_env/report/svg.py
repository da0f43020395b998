"""Inline SVG charts for the HTML report: no JS library, no network, readable as plain markup."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from html import escape

__all__ = ["PALETTE", "bar_chart", "hbar_chart"]

PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#eeca3b", "#9d755d")


def bar_chart(
    labels: Sequence[str],
    series: Mapping[str, Sequence[float]],
    *,
    ymax: float | None = None,
    fmt: Callable[[float], str] = lambda v: f"{v:.2f}",
    height: int = 220,
    title: str = "",
) -> str:
    """Vertical grouped bars: one group per label, one bar per series, a legend when several series."""
    n_groups, n_series = max(len(labels), 1), max(len(series), 1)
    top = ymax if ymax is not None else max((v for vs in series.values() for v in vs), default=1.0) or 1.0
    longest = max((len(label[:28]) for label in labels), default=4)
    bar_w, gap, left, bottom, plot_h = 18, 14, max(40, 12 + int(longest * 5.2)), 60, height - 80
    width = left + n_groups * (n_series * bar_w + gap) + 20
    out = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{max(width, 260)}" height="{height}" '
        f'role="img" aria-label="{escape(title)}">'
    ]
    for frac in (0.0, 0.5, 1.0):
        y = 20 + plot_h * (1 - frac)
        out.append(
            f'<line x1="{left}" x2="{width}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
            f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end" class="tick">{escape(fmt(top * frac))}</text>'
        )
    for gi, label in enumerate(labels):
        x0 = left + gi * (n_series * bar_w + gap) + gap / 2
        for si, (name, vals) in enumerate(series.items()):
            v = vals[gi] if gi < len(vals) else 0.0
            h = plot_h * (v / top if top else 0)
            out.append(
                f'<rect x="{x0 + si * bar_w:.1f}" y="{20 + plot_h - h:.1f}" width="{bar_w - 2}" height="{h:.1f}" '
                f'fill="{PALETTE[si % len(PALETTE)]}"><title>{escape(name)} / {escape(label)}: '
                f"{escape(fmt(v))}</title></rect>"
            )
        cx = x0 + n_series * bar_w / 2
        out.append(
            f'<text x="{cx:.1f}" y="{height - bottom + 34}" text-anchor="end" class="label" '
            f'transform="rotate(-30 {cx:.1f} {height - bottom + 34})">{escape(label[:28])}</text>'
        )
    if len(series) > 1:
        for si, name in enumerate(series):
            out.append(
                f'<rect x="{left + si * 110}" y="2" width="10" height="10" fill="{PALETTE[si % len(PALETTE)]}"/>'
                f'<text x="{left + si * 110 + 14}" y="11" class="tick">{escape(name[:14])}</text>'
            )
    out.append("</svg>")
    return "".join(out)


def hbar_chart(
    labels: Sequence[str], values: Sequence[float], *, fmt: Callable[[float], str] = lambda v: f"{v:.1f}", width: int = 560, title: str = ""
) -> str:
    """Horizontal bars, one row per label (tasks): long labels stay readable."""
    row, left = 18, 230
    height = 10 + row * max(len(labels), 1)
    top = max(values, default=1.0) or 1.0
    out = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" aria-label="{escape(title)}">'
    ]
    for i, (label, v) in enumerate(zip(labels, values, strict=False)):
        y = 5 + i * row
        w = (width - left - 70) * v / top
        out.append(
            f'<text x="{left - 6}" y="{y + 12}" text-anchor="end" class="label">{escape(label[-36:])}</text>'
            f'<rect x="{left}" y="{y + 2}" width="{w:.1f}" height="{row - 5}" fill="{PALETTE[0]}">'
            f"<title>{escape(label)}: {escape(fmt(v))}</title></rect>"
            f'<text x="{left + w + 4:.1f}" y="{y + 12}" class="tick">{escape(fmt(v))}</text>'
        )
    out.append("</svg>")
    return "".join(out)
