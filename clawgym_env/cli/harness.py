"""`clawgym harness` commands: install the pinned harnesses into the cache and list them."""

from __future__ import annotations

import typer

app = typer.Typer(help="Install and list agent harnesses (Claude Code, OpenClaw, custom).", no_args_is_help=True)


@app.command("install")
def install(
    name: str = typer.Argument("all", help="claude-code, openclaw, custom or all"),
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
        typer.echo(f"{n:12} {harness.version:10} {harness.dialect:17} {state:14} {HARNESSES[n]}")
