"""`clawgym harness` commands: install the pinned harnesses into the cache and list them."""

from __future__ import annotations

import typer

app = typer.Typer(
    help="Install and list agent harnesses (Claude Code, OpenClaw, Codex, Gemini CLI, Qwen Code, OpenCode, pi, custom).",
    no_args_is_help=True,
)


@app.command("install")
def install(
    name: str = typer.Argument("all", help="a harness name (see `clawgym harness list`) or all"),
) -> None:
    """npm-install the pinned harness versions into the cache ($CLAWGYM_CACHE or ~/.cache/clawgym)."""
    import logging

    from clawgym_env.errors import ClawGymError
    from clawgym_env.harness_install import cache_root
    from clawgym_env.harness_registry import harness_names, load_harness

    logging.basicConfig(level=logging.INFO, format="  %(message)s")
    names = harness_names() if name == "all" else [name]
    try:
        for n in names:
            harness = load_harness(n)
            typer.echo(f"[{n}] installing {harness.name} {harness.version}")
            root = harness.install(cache_root())
            typer.echo(f"[{n}] ready at {root}")
    except ClawGymError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc


@app.command("list")
def list_() -> None:
    """Show each harness: pinned version, API dialect and whether it is installed."""
    from clawgym_env.harness_install import cache_root
    from clawgym_env.harness_registry import HARNESSES, harness_names, load_harness

    for n in harness_names():
        harness = load_harness(n)
        try:
            harness.mounts(cache_root())
            state = "installed"
        except Exception as exc:  # noqa: BLE001 - shown to the user, not swallowed
            state = f"not installed ({type(exc).__name__})"
        typer.echo(f"{n:16} {harness.version:10} {harness.dialect:17} {state:14} {HARNESSES[n]}")


@app.command("run")
def run(
    name: str = typer.Argument(..., help="a harness name (see `clawgym harness list`) or module:Class"),
    task: str = typer.Option(..., "--task", help="full task id <suite>/<task>, e.g. clawgym-original/smoke-hello-file-p0"),
    model: str = typer.Option("default", "--model", help="policy spec (hf:PATH, vllm:URL, scripted:FILE, ...)"),
    capture_dir: str | None = typer.Option(None, "--capture-dir", help="keep the capture and the harness transcript here"),
    sandbox: str = typer.Option("bwrap", "--sandbox", help="sandbox backend"),
    max_tokens: int | None = typer.Option(None, "--max-tokens", help="cap each completion (overrides the harness)"),
) -> None:
    """Run one episode of a harness on a task and print its outcome as JSON (for adapter debugging)."""
    import asyncio
    import json
    from pathlib import Path

    from clawgym_env.episode import run_episode
    from clawgym_env.errors import ClawGymError
    from clawgym_env.proxy.backends.factory import backend_from_spec

    try:
        backend = backend_from_spec(model)
        sampling = {"max_tokens": max_tokens} if max_tokens else None
        result = asyncio.run(
            run_episode(task, name, backend, sandbox=sandbox, sampling=sampling, capture_dir=Path(capture_dir) if capture_dir else None)
        )
    except ClawGymError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(
        json.dumps(
            {
                "session_id": result.session_id,
                "task_id": result.task_id,
                "harness": result.harness,
                "status": result.status,
                "score": result.score,
                "subscores": result.subscores,
                "calls": len(result.calls),
                "error": result.error,
                "harness_exit_code": result.harness_exit_code,
                "timings": {k: round(v, 3) for k, v in result.timings.items()},
                "capture": str(result.capture_path) if result.capture_path else None,
                "egress_attempts": result.egress_attempts,
            },
            indent=2,
        )
    )
    if result.status == "error":
        raise typer.Exit(2)
