"""The `clawgym` command: one Typer group per module, assembled here."""

from __future__ import annotations

import typer

from clawgym_env._version import __version__
from clawgym_env.cli import bench, harness, leaderboard, proxy, sandbox, tasks, trace

app = typer.Typer(
    name="clawgym",
    help="Train and evaluate LLM agents through real, unmodified agent harnesses.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
app.add_typer(tasks.app, name="tasks")
app.add_typer(sandbox.app, name="sandbox")
app.add_typer(harness.app, name="harness")
app.add_typer(proxy.app, name="proxy")
app.add_typer(bench.app, name="bench")
app.add_typer(trace.app, name="trace")
app.add_typer(leaderboard.app, name="leaderboard")


@app.command()
def version() -> None:
    """Print the clawgym version."""
    typer.echo(__version__)


if __name__ == "__main__":
    app()
