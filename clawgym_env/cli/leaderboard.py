"""`clawgym leaderboard` commands: bundle and submit results; serve, administer and export a board.

The server side lives in the top-level ``leaderboard`` package, loaded by name so the core never
imports it (the import contract in pyproject.toml).
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

app = typer.Typer(help="Submit results to a leaderboard; serve, administer and export one.", no_args_is_help=True)
console = Console()
DEFAULT_DB = "sqlite:///leaderboard.db"


def _fail(message: object) -> typer.Exit:
    from rich.markup import escape

    Console(stderr=True).print(f"[red]error:[/] {escape(str(message))}", highlight=False, soft_wrap=True)
    return typer.Exit(2)


def _store(db: str) -> Any:
    """Open the board's database; a malformed URL is one error line."""
    from sqlalchemy.exc import ArgumentError, OperationalError

    from clawgym_env.errors import ClawGymError

    try:
        return _lb("leaderboard.store:Store")(db)
    except ClawGymError as exc:
        raise _fail(exc) from None
    except (ArgumentError, OperationalError) as exc:
        raise _fail(
            f"cannot open the leaderboard database {db!r} ({str(exc).splitlines()[0]}). "
            "Fix: give --db a SQLAlchemy URL such as sqlite:///leaderboard.db"
        ) from None


def _lb(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


@app.command()
def submit(
    results: Path = typer.Argument(..., help="A results folder written by `clawgym bench run`, or a bundle file `--out` wrote."),
    server: str | None = typer.Option(None, help="Leaderboard URL, e.g. https://board.example.org"),
    token: str | None = typer.Option(None, envvar="CLAWGYM_LEADERBOARD_TOKEN", help="Your submitter token."),
    out: Path | None = typer.Option(None, help="Write an offline bundle file instead of uploading."),
    captures: bool = typer.Option(True, help="Include the captured calls (trajectories)."),
    workspaces: bool = typer.Option(
        True, help="Include the final workspaces (`bench run --save-workspaces`) so the server re-grades the run."
    ),
) -> None:
    """Bundle a results folder and upload it (or write it with --out); a bundle file is uploaded as it is."""
    import httpx

    from clawgym_env.bundle import make_bundle, read_bundle
    from clawgym_env.errors import ClawGymError

    try:
        if results.is_file():
            data = results.read_bytes()
            read_bundle(data)  # the server's own checks first, so a wrong file fails here and says why
        else:
            data = make_bundle(results, include_captures=captures, include_workspaces=workspaces)
    except ClawGymError as exc:
        raise _fail(f"{results}: {exc}" if results.is_file() else exc) from None
    if out is not None:
        out.write_bytes(data)
        console.print(f"wrote {out} ({len(data)} bytes)")
        return
    if not server or not token:
        raise typer.BadParameter("give --server and --token (or --out FILE for an offline bundle)")
    try:
        r = httpx.post(
            f"{server.rstrip('/')}/api/submissions",
            content=data,
            timeout=120,
            headers={"authorization": f"Bearer {token}", "content-type": "application/gzip"},
        )
    except httpx.HTTPError as exc:
        raise _fail(
            f"cannot reach the leaderboard at {server} ({type(exc).__name__}: {exc}). "
            "Fix: check --server (is `clawgym leaderboard serve` running there?)"
        ) from None
    body: dict[str, Any] = r.json() if r.headers.get("content-type", "").startswith("application/json") else {"error": r.text}
    if r.status_code != 201:
        console.print(f"[red]refused ({r.status_code}):[/red] {body.get('error', body)}")
        raise typer.Exit(1)
    disagree = f", {body['disagreements']} disagree" if body["disagreements"] else ""
    console.print(
        f"accepted: {server.rstrip('/')}{body['url']}  Pass@1 {100 * body['metrics']['pass_at']['1']:.1f}%  ({body['trust']}{disagree})"
    )


@app.command()
def serve(
    db: str = typer.Option(DEFAULT_DB, envvar="CLAWGYM_LEADERBOARD_DB", help="SQLAlchemy URL."),
    host: str = "127.0.0.1",
    port: int = 8000,
) -> None:
    """Run the leaderboard server."""
    import uvicorn

    store = _store(db)
    uvicorn.run(_lb("leaderboard.app:create_app")(store), host=host, port=port, log_level="info")


@app.command("add-submitter")
def add_submitter(name: str, db: str = typer.Option(DEFAULT_DB, envvar="CLAWGYM_LEADERBOARD_DB")) -> None:
    """Create a submitter and print its token (shown once)."""
    from clawgym_env.errors import ClawGymError

    try:
        token = _store(db).add_submitter(name)
    except ClawGymError as exc:
        raise _fail(exc) from None
    console.print(token)


@app.command("add-suite")
def add_suite(suite: str, db: str = typer.Option(DEFAULT_DB, envvar="CLAWGYM_LEADERBOARD_DB")) -> None:
    """Register the current version of a suite (name or folder) so runs on it are accepted.

    The folder is remembered: the server re-grades submitted workspaces with its hidden files.
    """
    from clawgym_env.errors import ClawGymError
    from clawgym_env.task import load_suite

    try:
        s = load_suite(suite)
    except ClawGymError as exc:
        raise _fail(exc) from None
    _store(db).add_suite(
        s.name,
        s.content_hash,
        [t.full_id for t in s.tasks],
        {t.full_id: t.category for t in s.tasks},
        s.pass_threshold,
        source_dir=str(s.path),
    )
    console.print(f"registered {s.name} {s.content_hash.rpartition(':')[2][:16]} ({len(s.tasks)} tasks)")


@app.command()
def export(
    out: Path = typer.Option(Path("site"), help="Folder for the static site."),
    db: str = typer.Option(DEFAULT_DB, envvar="CLAWGYM_LEADERBOARD_DB"),
) -> None:
    """Export the whole leaderboard as a static site."""
    files = _lb("leaderboard.app:export_site")(_store(db), out)
    console.print(f"wrote {len(files)} pages to {out}{os.sep}")
