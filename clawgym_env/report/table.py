"""Terminal tables (rich) for one run and for two runs side by side."""

from __future__ import annotations

from pathlib import Path

from rich import box
from rich.console import Console, Group
from rich.table import Table

from clawgym_env.metrics import GroupMetrics, Metrics, compute_metrics
from clawgym_env.results import RunManifest

__all__ = ["compare_table", "print_compare", "print_report", "print_runs", "runs_table", "summary_tables"]


def _short(digest: str) -> str:
    return digest.split(":")[-1][:12]


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _row(name: str, m: GroupMetrics, ks: list[int]) -> list[str]:
    return [
        name,
        str(m.attempts),
        _pct(m.mean_score),
        *(_pct(m.pass_at.get(k)) for k in ks),
        str(m.passed),
        str(m.failed),
        str(m.errors),
        str(m.timeouts),
        str(m.truncated),
        f"{m.prompt_tokens + m.completion_tokens:,}",
        f"{m.total_time_s / max(m.attempts, 1):.1f}",
    ]


def _table(title: str, first: str, groups: dict[str, GroupMetrics], ks: list[int]) -> Table:
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 0, 0, 1), pad_edge=False)
    t.add_column(first, justify="left", no_wrap=True, min_width=8)
    for col in ("n", "score%", *(f"p@{k}%" for k in ks), "pass", "fail", "err", "t/o", "trunc", "tokens", "s/att"):
        t.add_column(col, justify="right", no_wrap=True)
    for name, m in groups.items():
        t.add_row(*_row(name, m, ks))
    return t


def summary_tables(manifest: RunManifest, metrics: Metrics) -> Group:
    """Overall, per harness and per category, with the pass rule stated."""
    ks = metrics.ks
    head = (
        f"[bold]{manifest.suite}[/] ({len(manifest.task_ids)} tasks, suite {_short(manifest.suite_hash)})  "
        f"model [bold]{manifest.model}[/]  harness {', '.join(f'{k} {v}' for k, v in manifest.harnesses.items())}  "
        f"k={manifest.attempts}\npass rule: an attempt passes iff score >= {manifest.pass_threshold:g} "
        "(suite.yaml pass_threshold); errors, timeouts, truncations counted apart and kept in every denominator"
    )
    if manifest.evaluation_only:
        head += "\n[yellow]evaluation only: the model returned no token ids[/]"
    parts: list[object] = [head, _table("overall", "run", {"all": metrics.overall}, ks)]
    parts.append(_table("per harness", "harness", metrics.per_harness, ks))
    parts.append(_table("per category", "category", metrics.per_category, ks))
    return Group(*parts)  # type: ignore[arg-type]  # rich renders str and Table alike


def print_report(out_dir: Path, console: Console | None = None) -> Metrics:
    """Print a results folder's tables; returns the metrics (recomputed from the attempt records)."""
    from clawgym_env.runner.folder import load_attempts, load_manifest

    manifest = load_manifest(out_dir)
    attempts = load_attempts(out_dir)
    metrics = compute_metrics(attempts, manifest.pass_threshold)
    console = console or Console()
    planned = len(manifest.task_ids) * len(manifest.harnesses) * manifest.attempts
    if len(attempts) < planned:  # a killed or still-running run: the figures cover only what finished
        console.print(
            f"[yellow]incomplete run: {len(attempts)} of {planned} attempts finished; the figures below "
            f"cover only those. Run `clawgym bench resume {out_dir}` to finish it.[/]",
            highlight=False,
            soft_wrap=True,
        )
    console.print(summary_tables(manifest, metrics))
    return metrics


def runs_table(out_dirs: list[Path]) -> Table:
    """One row per results folder: how it sampled and its overall figures, recomputed from the attempt records.

    An experiment's stages are several folders; this puts them in one table (``clawgym bench report A B C``)."""
    from clawgym_env.runner.folder import load_attempts, load_manifest

    t = Table(title="runs", title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 0, 0, 1), pad_edge=False)
    t.add_column("run", justify="left", overflow="fold")
    for col in ("tasks", "k", "T", "n", "pass", "score%", "p@1%", "p@k%", "err", "unfinished"):
        t.add_column(col, justify="right", no_wrap=True)
    for out_dir in out_dirs:
        manifest = load_manifest(out_dir)
        attempts = load_attempts(out_dir)
        m = compute_metrics(attempts, manifest.pass_threshold).overall
        k = manifest.attempts
        temperature = manifest.sampling.get("temperature")
        planned = len(manifest.task_ids) * len(manifest.harnesses) * k
        t.add_row(
            str(out_dir),
            str(len(manifest.task_ids)),
            str(k),
            "-" if temperature is None else f"{temperature:g}",
            str(m.attempts),
            str(m.passed),
            _pct(m.mean_score),
            _pct(m.pass_at.get(1)),
            _pct(m.pass_at.get(k)) if k > 1 else "-",
            str(m.errors),
            str(max(planned - len(attempts), 0)),
        )
    return t


def print_runs(out_dirs: list[Path], console: Console | None = None) -> Table:
    """Print ``runs_table`` of several results folders."""
    t = runs_table(out_dirs)
    (console or Console()).print(t)
    return t


def compare_table(a: tuple[str, RunManifest, Metrics], b: tuple[str, RunManifest, Metrics]) -> Table:
    """Two runs side by side: overall, per harness and per category, with the difference."""
    (na, ma, xa), (nb, mb, xb) = a, b
    k = max(set(xa.ks) & set(xb.ks), default=1)
    t = Table(
        title=f"A = {na} ({ma.model})  vs  B = {nb} ({mb.model})",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        padding=(0, 0, 0, 1),
        pad_edge=False,
    )
    t.add_column("group", justify="left", no_wrap=True)
    for col in ("score A%", "B%", "delta", f"p@{k} A%", "B%", "delta", "err A", "B"):
        t.add_column(col, justify="right", no_wrap=True)

    def add(name: str, ga: GroupMetrics | None, gb: GroupMetrics | None) -> None:
        sa = ga.mean_score if ga else None
        sb = gb.mean_score if gb else None
        pa = ga.pass_at.get(k) if ga else None
        pb = gb.pass_at.get(k) if gb else None
        d1 = f"{100 * (sb - sa):+.1f}" if sa is not None and sb is not None else "-"
        d2 = f"{100 * (pb - pa):+.1f}" if pa is not None and pb is not None else "-"
        t.add_row(name, _pct(sa), _pct(sb), d1, _pct(pa), _pct(pb), d2, str(ga.errors) if ga else "-", str(gb.errors) if gb else "-")

    add("overall", xa.overall, xb.overall)
    for h in sorted(set(xa.per_harness) | set(xb.per_harness)):
        add(f"harness {h}", xa.per_harness.get(h), xb.per_harness.get(h))
    for c in sorted(set(xa.per_category) | set(xb.per_category)):
        add(f"category {c}", xa.per_category.get(c), xb.per_category.get(c))
    return t


def print_compare(dir_a: Path, dir_b: Path, console: Console | None = None) -> Table:
    """Print two results folders side by side (warns when they ran different suites or suite versions)."""
    from clawgym_env.runner.folder import load_attempts, load_manifest

    runs = []
    for d in (dir_a, dir_b):
        m = load_manifest(d)
        runs.append((Path(d).name, m, compute_metrics(load_attempts(d), m.pass_threshold)))
    console = console or Console()
    if runs[0][1].suite_hash != runs[1][1].suite_hash:
        console.print(
            f"[yellow]warning: the runs used different suites or suite versions "
            f"({runs[0][1].suite} {_short(runs[0][1].suite_hash)} vs {runs[1][1].suite} {_short(runs[1][1].suite_hash)})[/]"
        )
    t = compare_table(runs[0], runs[1])
    console.print(t)
    changed = task_changes(runs[0][2], runs[1][2])
    if changed:
        ct = Table(
            title="tasks whose mean score changed most (B - A)",
            title_justify="left",
            box=box.SIMPLE_HEAD,
            padding=(0, 0, 0, 1),
            pad_edge=False,
        )
        ct.add_column("task | harness", no_wrap=True)
        for col in ("A", "B", "delta"):
            ct.add_column(col, justify="right")
        for key, sa, sb in changed[:15]:
            ct.add_row(key, f"{sa:.2f}", f"{sb:.2f}", f"{sb - sa:+.2f}")
        console.print(ct)
    return t


def task_changes(a: Metrics, b: Metrics) -> list[tuple[str, float, float]]:
    """(task|harness, score A, score B) for pairs in both runs whose mean score differs, largest change first."""
    both = sorted(set(a.per_task) & set(b.per_task))
    rows = [(k, a.per_task[k].mean_score, b.per_task[k].mean_score) for k in both]
    rows = [r for r in rows if abs(r[2] - r[1]) > 1e-9]
    return sorted(rows, key=lambda r: (-abs(r[2] - r[1]), r[0]))
