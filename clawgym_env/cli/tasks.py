"""`clawgym tasks`: list, show, validate, import, pull and check task suites."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from clawgym_env.authoring.importers import ImportReport

app = typer.Typer(help="Task suites: list, show, validate, import, pull, check.", no_args_is_help=True)


def _fail(message: object, code: int = 1) -> typer.Exit:
    from rich.console import Console
    from rich.markup import escape

    if isinstance(message, KeyError) and message.args:  # KeyError's str() adds quotes
        message = message.args[0]

    Console(stderr=True).print(f"[red]error:[/red] {escape(str(message))}", markup=True, highlight=False, soft_wrap=True)
    return typer.Exit(code)


@app.command("list")
def list_cmd(suite: str = typer.Argument(None, help="A suite name or folder; omit to list suites.")) -> None:
    """List the known suites, or the tasks of one suite."""
    from rich.console import Console
    from rich.table import Table

    from clawgym_env.errors import ClawGymError
    from clawgym_env.task.loader import TASK_FILE, load_suite_spec
    from clawgym_env.task.suite import SUITE_FILE, load_suite, suite_search_path

    console = Console()
    try:
        if suite is None:
            table = Table("suite", "task folders", "pass ≥", "folder")  # suite.yaml only: fast on huge suites
            for root in suite_search_path():
                if not root.is_dir():
                    continue
                for d in sorted(p for p in root.iterdir() if (p / SUITE_FILE).is_file()):
                    count = sum(1 for t in d.iterdir() if (t / TASK_FILE).is_file())
                    try:
                        spec = load_suite_spec(d)
                        table.add_row(spec.name, str(count), f"{spec.pass_threshold:g}", str(d))
                    except ClawGymError as exc:
                        table.add_row(d.name, str(count), "[red]invalid[/red]", f"{d} ({str(exc).splitlines()[0][:80]})")
            console.print(table)
            return
        s = load_suite(suite)
    except ClawGymError as exc:
        raise _fail(exc) from None
    table = Table("id", "category", "difficulty", "verifiers", "solution", title=f"{s.name} ({len(s)} tasks, {s.content_hash[:19]})")
    for t in s.tasks:
        kinds = ", ".join(f"{v.kind}:{v.weight:g}" for v in t.verifiers)
        table.add_row(t.id, t.category, t.difficulty, kinds, "yes" if t.solution_path else "-")
    console.print(table)


@app.command()
def show(task_id: str = typer.Argument(..., help='A task id "suite/task" (suite by name or folder).')) -> None:
    """Show one task: instruction, paths, verifiers and limits."""
    from rich.console import Console

    from clawgym_env.errors import ClawGymError
    from clawgym_env.task.suite import load_suite

    suite_name, sep, tid = task_id.rpartition("/")
    if not sep:
        raise _fail(f"{task_id!r}: give the task as suite/task, e.g. clawgym-original/dedupe-contacts")
    try:
        spec = load_suite(suite_name).get(tid)
    except ClawGymError as exc:
        raise _fail(exc) from None
    console = Console()
    console.print(f"[bold]{spec.full_id}[/bold]  v{spec.version}  {spec.category} / {spec.difficulty}")
    console.print(f"task folder:  {spec.task_dir}")
    console.print(f"workspace:    {spec.workspace_dir or '(empty)'} -> {spec.workspace_mount}")
    console.print(f"hidden:       {spec.hidden_dir or '(none)'} -> {spec.hidden_mount} (after the agent)")
    console.print(f"solution:     {spec.solution_path or '(none)'}")
    lim = spec.limits
    console.print(f"limits:       {lim.wall_time_s:g}s, {lim.model_calls} calls, {lim.memory_mb} MB")
    for v in spec.verifiers:
        console.print(f"verifier:     {v.name} ({v.kind}, weight {v.weight:g})", highlight=False)
    if spec.params:
        console.print(f"params:       {spec.params}", highlight=False)
    if spec.metadata:
        console.print(f"metadata:     {spec.metadata}", highlight=False)
    console.rule("instruction")
    console.print(spec.instruction, markup=False, highlight=False)


@app.command()
def validate(path: Path = typer.Argument(..., help="A suite folder or name, a task folder, or a task.yaml.")) -> None:
    """Validate specs without running anything; prints every problem found."""
    from rich.console import Console

    from clawgym_env.errors import TaskSpecError
    from clawgym_env.task.loader import SUITE_FILE, TASK_FILE, load_task_dir
    from clawgym_env.task.suite import validate_suite

    console = Console()
    if not path.exists() and "/" not in str(path):  # a suite name
        from clawgym_env.errors import ClawGymError
        from clawgym_env.task.suite import resolve_suite_dir

        try:
            path = resolve_suite_dir(str(path))
        except ClawGymError as exc:
            raise _fail(exc) from None
    target = path.parent if path.name in (TASK_FILE, SUITE_FILE) and path.is_file() else path
    if (target / SUITE_FILE).is_file():
        count, errors = validate_suite(target)
    elif (target / TASK_FILE).is_file():
        suite = target.parent.name
        try:
            count, errors = len(load_task_dir(target, suite)), []
        except TaskSpecError as exc:
            count, errors = 0, [exc]
    else:
        raise _fail(f"{path}: no suite.yaml or task.yaml there. Fix: point at a suite folder, a task folder or a task.yaml.")
    for err in errors:
        console.print(f"[red]✗[/red] {err}", highlight=False, soft_wrap=True)
    if errors:
        raise typer.Exit(1)
    console.print(f"[green]✓[/green] {target}: {count} task spec(s) valid")


@app.command("import")
def import_cmd(
    fmt: str = typer.Argument(..., metavar="FORMAT", help="clawgym | clawgym-hf | jobbench | officeqa"),
    path: Path = typer.Argument(..., help="The source folder or file."),
    suite: str = typer.Option(..., "--suite", help="Name of the suite to create."),
    out: Path = typer.Option(None, "--out", help="Parent folder (default: ~/.cache/clawgym/suites)."),
    force: bool = typer.Option(False, "--force", help="Replace an existing suite of that name."),
    docs: Path = typer.Option(None, "--docs", help="officeqa: folder of the source documents (default: the CSV's folder)."),
    tolerance: float = typer.Option(
        0.0, "--tolerance", help="officeqa: relative tolerance, one of the official levels 0, 0.001, 0.01, 0.05."
    ),
    split: str = typer.Option(None, "--split", help="officeqa: full (default) or pro; jobbench: main, easy or all (default)."),
    tag: str = typer.Option("FINAL_ANSWER", "--tag", help="officeqa: the final-answer tag (official: FINAL_ANSWER)."),
    skip_invalid: bool = typer.Option(
        False, "--skip-invalid", help="Import the valid tasks and list the invalid ones (default: refuse the import)."
    ),
) -> None:
    """Convert a third-party task set into a ClawGym suite (written atomically, validated), keeping the
    benchmark's own scoring; prints what it mapped and what it could not."""
    from clawgym_env.authoring.importers import import_suite
    from clawgym_env.errors import ClawGymError

    options: dict[str, Any] = {}
    if fmt == "officeqa":
        options = {"docs": docs, "tolerance": tolerance, "split": split or "full", "tag": tag}
    elif fmt == "jobbench":
        options = {"split": split or "all"}
    try:
        report = import_suite(fmt, path, suite, out, force=force, skip_invalid=skip_invalid, **options)
    except ClawGymError as exc:
        raise _fail(exc) from None
    _print_report(report)


def _print_report(report: ImportReport) -> None:
    from rich.console import Console

    console = Console()
    console.print(f"[green]✓[/green] imported {report.tasks} task(s) into {report.path}")
    for title, lines in (("mapped", report.mapped), ("not mapped", report.not_mapped)):
        if lines:
            console.print(f"[bold]{title}:[/bold]")
            for line in lines:
                console.print(f"  - {line}", markup=False, highlight=False)
    skipped = report.skipped
    if skipped:
        console.print(f"[yellow]skipped {len(skipped)}:[/yellow]")
        for line in skipped[:50]:
            console.print(f"  {line}", markup=False, highlight=False)


@app.command()
def pull(
    name: str = typer.Argument(..., help="clawgym-bench (RUC-AIBOX/ClawGym-Task on Hugging Face)."),
    out: Path = typer.Option(None, "--out", help="Parent folder (default: ~/.cache/clawgym/suites)."),
    force: bool = typer.Option(False, "--force", help="Replace an existing suite of that name."),
) -> None:
    """Download a public suite with the Hugging Face client and import it."""
    from clawgym_env.authoring.importers import import_suite
    from clawgym_env.authoring.importers.clawgym_hf import download_clawgym_bench
    from clawgym_env.errors import ClawGymError

    if name != "clawgym-bench":
        raise _fail(f"unknown suite {name!r} to pull. Fix: use clawgym-bench, or `clawgym tasks import` for local copies.")
    try:
        jsonl = download_clawgym_bench()
        report = import_suite("clawgym-hf", jsonl, name, out, force=force)
    except ClawGymError as exc:
        raise _fail(exc) from None
    _print_report(report)


def _strategies(s: object, extra: list[str] | None, only: str | None) -> list[Any]:
    from clawgym_env.authoring.adversarial import default_strategies, load_strategy, suite_strategies
    from clawgym_env.errors import ConfigError

    found = default_strategies() + suite_strategies(s.spec.metadata, s.path)  # type: ignore[attr-defined]  # a loaded Suite
    found += [load_strategy(ref) for ref in extra or []]
    if only:
        names = {n.strip() for n in only.split(",") if n.strip()}
        unknown = names - {x.name for x in found}
        if unknown:
            raise ConfigError(f"--only names unknown strategies {sorted(unknown)}; known: {sorted(x.name for x in found)}")
        found = [x for x in found if x.name in names]
    return found


def _print_exploits(console: object, results: list[Any]) -> None:
    from rich.table import Table

    lifted = [r for r in results if (r.exploit_score or 0) > 0]
    title = f"adversarial: {len(lifted)} of {len(results)} task(s) lifted above 0 by some strategy"
    shown = [
        r
        for r in sorted(results, key=lambda r: -(r.exploit_score or 0))
        if (r.exploit_score or 0) > 0 or r.exploit_status in ("fail", "error")
    ][:40]
    played = sum(len(r.attempts) for r in results)
    if not shown:
        console.print(f"{title} ({played} attempts played)")  # type: ignore[attr-defined]  # a rich Console
        return
    table = Table(
        "task", "best gaming score", "by", "max_exploit_score", "status", title=title, caption=f"{played} attempts played; worst first"
    )
    for r in shown:
        table.add_row(r.task_id, f"{r.exploit_score or 0:.3f}", r.exploit_by, f"{r.max_exploit:g}", r.exploit_status)
    console.print(table)  # type: ignore[attr-defined]  # a rich Console


@app.command()
def strategies() -> None:
    """List the gaming strategies `tasks check --adversarial` plays (built-in and installed plug-ins)."""
    from rich.console import Console
    from rich.table import Table

    from clawgym_env.authoring.adversarial import default_strategies

    table = Table("strategy", "what it tries")
    for x in default_strategies():
        table.add_row(x.name, x.tries)
    Console().print(table)


@app.command()
def check(
    suite: str = typer.Argument(..., help="A suite name or folder."),
    tasks: str = typer.Option(None, "--tasks", help="Only task ids matching this glob."),
    backend: str = typer.Option("bwrap", "--backend", help="Sandbox backend: bwrap | docker | none."),
    concurrency: int = typer.Option(4, "--concurrency", "-j", min=1, help="Tasks checked at once."),
    judge: str = typer.Option(None, "--judge", help="Backend spec of the LLM judge for rubric verifiers."),
    record_noop: bool = typer.Option(
        False, "--record-noop", help="Declare measured non-zero do-nothing scores in task.yaml (rewrites it; for imported suites)."
    ),
    adversarial: bool = typer.Option(
        False,
        "--adversarial",
        help="Also play every gaming strategy against each task; fail tasks where one scores above metadata.max_exploit_score.",
    ),
    strategy: list[str] = typer.Option(
        None, "--strategy", help="Extra strategy 'package.module:Class' or 'file.py:Class' (repeatable; implies --adversarial)."
    ),
    only: str = typer.Option(None, "--only", help="With --adversarial: only these strategies (comma-separated names)."),
) -> None:
    """Run each task's reference solution (must score 1.0) and a do-nothing agent (must score its floor) in sandboxes.

    With --adversarial, also the strategy library (`clawgym tasks strategies` lists it), the suite's own
    (suite.yaml metadata.adversarial_strategies) and installed plug-ins."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from clawgym_env._sync import run_sync
    from clawgym_env.authoring.check import check_suite, record_noop_scores
    from clawgym_env.errors import ClawGymError
    from clawgym_env.task.suite import load_suite

    console = Console()
    try:
        s = load_suite(suite)
        specs = s.select(tasks) if tasks else list(s.tasks)
        strategies = _strategies(s, strategy, only) if adversarial or strategy else None
        judge_backend = None
        if judge:
            from clawgym_env.proxy.backends.factory import backend_from_spec

            judge_backend = backend_from_spec(judge, option="--judge")
    except ClawGymError as exc:
        raise _fail(exc) from None
    if not specs:
        raise _fail(f"no task of {s.name} matches {tasks!r}")
    columns = (TextColumn("checking {task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        bar = progress.add_task(s.name, total=len(specs))

        async def go() -> list[Any]:
            try:
                return await check_suite(
                    specs,
                    backend,
                    concurrency,
                    judge=judge_backend,
                    strategies=strategies,
                    pass_threshold=s.pass_threshold,
                    on_result=lambda r: progress.advance(bar),
                )
            finally:
                if judge_backend is not None:
                    await judge_backend.aclose()

        try:
            results = run_sync(go())
        except ClawGymError as exc:
            raise _fail(exc) from None
    if record_noop:
        for line in record_noop_scores(results, specs):
            console.print(f"[yellow]declared[/yellow] {line}", highlight=False)
    declared = [r for r in results if r.noop_status == "declared"]
    bad = [r for r in results if not r.ok]
    if bad:
        table = Table(
            "task", "solution", "do-nothing", "gaming", "problem", title=f"{len(bad)} of {len(specs)} task(s) failed", show_lines=True
        )
        for r in bad:
            sol = r.solution_status + (f" {r.solution_score:.3f}" if r.solution_score is not None else "")
            noop = r.noop_status + (f" {r.noop_score:.3f}" if r.noop_score is not None else "")
            gaming = r.exploit_status + (f" {r.exploit_score:.3f}" if r.exploit_score is not None else "")
            table.add_row(r.task_id, sol, noop, gaming, "\n".join(r.problems))
        console.print(table)
    if declared:
        table = Table("task", "do-nothing score", title="declared partial credit for doing nothing (expected_noop_score)")
        for r in declared:
            table.add_row(r.task_id, f"{r.noop_score:.3f}")
        console.print(table)
    n_sol = sum(r.solution_status == "pass" for r in results)
    n_none = sum(r.solution_status in ("none", "skipped") for r in results)
    if strategies is not None:
        _print_exploits(console, results)
    console.print(
        f"{len(specs)} task(s): {len(specs) - len(bad)} ok, {len(bad)} failed; "
        f"solutions passed {n_sol}, without a checked solution {n_none}; declared non-zero floors {len(declared)}"
    )
    if bad:
        raise typer.Exit(1)
