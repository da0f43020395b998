"""`clawgym bench`: run a model through harnesses on a suite, resume, report, compare."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

DEFAULT_MODEL_MAX_TOKENS = 128
"""Per-call token cap for the embedded CPU model when --max-tokens is not given."""

app = typer.Typer(help="Evaluate a model through agent harnesses on a task suite.", no_args_is_help=True)


def _fail(exc: Exception) -> None:
    from rich.console import Console
    from rich.markup import escape

    # escape: a message may hold brackets ("vllm:URL[#MODEL]", paths) that rich would eat as markup
    Console(stderr=True).print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


@app.command()
def run(
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="default | hf:PATH | vllm:URL | openai:URL#MODEL | "
            "anthropic:URL#MODEL | scripted:FILE. Not given: the embedded model as "
            "shipped and with its trained adapter, side by side.",
        ),
    ] = None,
    harness: Annotated[str, typer.Option("--harness", help="Harness name(s), comma-separated.")] = "custom",
    suite: Annotated[
        str | None, typer.Option("--suite", help="Suite name or folder (default clawgym-original; without --model: procgen-test).")
    ] = None,
    tasks: Annotated[
        str | None,
        typer.Option("--tasks", help="fnmatch pattern(s) over task ids, comma-separated (default all; 'smoke-*' with --model default)."),
    ] = None,
    attempts: Annotated[int, typer.Option("-k", "--attempts", "-n", help="Attempts per (task, harness).")] = 1,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", help="Episodes in flight (per node).")] = 4,
    sandbox: Annotated[str, typer.Option("--sandbox", help="bwrap | docker")] = "bwrap",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Results folder (default runs/<timestamp>).")] = None,
    executor: Annotated[str, typer.Option("--executor", help="local | ray")] = "local",
    ray_address: Annotated[str | None, typer.Option("--ray-address", help="Ray cluster address (ray executor).")] = None,
    max_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-tokens", help=f"Max tokens per model call (default: the harness's; {DEFAULT_MODEL_MAX_TOKENS} for --model default)."
        ),
    ] = None,
    temperature: Annotated[float | None, typer.Option("--temperature")] = None,
    top_p: Annotated[float | None, typer.Option("--top-p")] = None,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed", help="Run seed: each attempt samples with its own seed derived from it (reproducible, independent attempts)."
        ),
    ] = None,
    judge: Annotated[str | None, typer.Option("--judge", help="Backend spec for rubric verifiers.")] = None,
    save_workspaces: Annotated[bool, typer.Option("--save-workspaces", help="Keep final workspaces.")] = False,
    html: Annotated[Path | None, typer.Option("--html", help="HTML report path (default DIR/report.html).")] = None,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No live display.")] = False,
    worker: Annotated[str, typer.Option("--worker", hidden=True)] = "clawgym_env.runner:EpisodeWorker",
) -> None:
    """Run every (task x harness x attempt) episode and print a results table.

    Without --model: the embedded model as shipped and with the LoRA adapter the project trained, each run on
    held-out one-command tasks (procgen-test), printed side by side."""
    from clawgym_env._sync import run_sync
    from clawgym_env.errors import ClawGymError
    from clawgym_env.report import print_compare, print_report, write_html
    from clawgym_env.runner import RunConfig, run_benchmark
    from clawgym_env.runner.first_run import MAX_TOKENS, SUITE, TASKS, first_run_models, run_models

    models: dict[str, str] | None = None
    if model is None:  # the README's first command: it ends in minutes on a 2-core CPU box
        try:
            models = first_run_models()
        except ClawGymError as exc:
            _fail(exc)
        model = "default"
        if suite is None:
            suite, tasks = SUITE, TASKS if tasks is None else tasks
        max_tokens = MAX_TOKENS if max_tokens is None else max_tokens
        temperature = 0.0 if temperature is None else temperature
    suite = suite or "clawgym-original"
    if model == "default" and models is None:
        if tasks is None and suite == "clawgym-original":
            tasks = "smoke-*"
        if max_tokens is None:
            max_tokens = DEFAULT_MODEL_MAX_TOKENS
    try:
        config = RunConfig(
            model=model,
            harnesses=[h.strip() for h in harness.split(",") if h.strip()],
            suite=suite,
            tasks=tasks,
            attempts=attempts,
            concurrency=concurrency,
            sandbox=sandbox,
            out=str(out) if out else None,
            executor=executor,
            ray_address=ray_address,
            max_tokens=max_tokens,
            temperature=temperature,
            top_p=top_p,
            seed=seed,
            judge=judge,
            save_workspaces=save_workspaces,
            worker=worker,
        )
        if models is not None:
            summaries = run_sync(run_models(config, models, progress=not no_progress))
            base, trained = (summaries[name].out_dir for name in models)
            for name, s in summaries.items():
                typer.echo(
                    f"{name}: {s.manifest.model}  results: {s.out_dir}  ({s.ran} attempts run, {s.elapsed_s:.0f}s)  "
                    f"report: {write_html(s.out_dir)}"
                )
            print_compare(base, trained)
            typer.echo(
                f"the same model as shipped (A) and with its trained adapter (B): Pass@1 "
                f"{100 * summaries['base'].metrics.overall.pass_at[1]:.1f}% -> "
                f"{100 * summaries['adapter'].metrics.overall.pass_at[1]:.1f}% on {len(summaries['base'].manifest.task_ids)} "
                f"held-out tasks ({base.parent})"
            )
            return
        summary = run_sync(run_benchmark(config, progress=not no_progress))
        print_report(summary.out_dir)
        page = write_html(summary.out_dir, html)
    except ClawGymError as exc:
        _fail(exc)
    typer.echo(f"results: {summary.out_dir}  ({summary.ran} attempts run, {summary.elapsed_s:.0f}s)  report: {page}")


@app.command()
def resume(
    out: Annotated[Path, typer.Argument(help="Results folder of an interrupted run.")],
    executor: Annotated[str | None, typer.Option("--executor", help="Override: local | ray")] = None,
    no_progress: Annotated[bool, typer.Option("--no-progress")] = False,
) -> None:
    """Rerun only the attempts of DIR that have not finished, then print the table."""
    from clawgym_env._sync import run_sync
    from clawgym_env.errors import ClawGymError
    from clawgym_env.report import print_report, write_html
    from clawgym_env.runner import resume as resume_run

    try:
        summary = run_sync(resume_run(out, progress=not no_progress, executor=executor))
        print_report(summary.out_dir)
        page = write_html(summary.out_dir)
    except ClawGymError as exc:
        _fail(exc)
    typer.echo(f"results: {summary.out_dir}  ({summary.ran} attempts run)  report: {page}")


@app.command()
def report(
    out: Annotated[list[Path], typer.Argument(help="Results folder(s).")],
    html: Annotated[Path | None, typer.Option("--html", help="Write the self-contained HTML report here (one folder).")] = None,
) -> None:
    """Print the results tables of DIR (recomputed from its attempt records); optionally write HTML.

    With several folders (an experiment's stages), one row each: how it sampled, passes, Pass@1 and Pass@k."""
    from clawgym_env.errors import ClawGymError, ConfigError
    from clawgym_env.report import print_report, print_runs, write_html

    try:
        if len(out) > 1:
            if html:
                raise ConfigError("--html writes the report of one results folder; give one folder")
            print_runs(out)
            return
        print_report(out[0])
        if html:
            typer.echo(f"html report: {write_html(out[0], html)}")
    except ClawGymError as exc:
        _fail(exc)


@app.command()
def compare(
    a: Annotated[Path, typer.Argument(help="First results folder.")],
    b: Annotated[Path, typer.Argument(help="Second results folder.")],
) -> None:
    """Two runs side by side: score and Pass@k overall, per harness, per category."""
    from clawgym_env.errors import ClawGymError
    from clawgym_env.report import print_compare

    try:
        print_compare(a, b)
    except ClawGymError as exc:
        _fail(exc)
