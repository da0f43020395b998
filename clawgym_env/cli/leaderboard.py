"""`clawgym leaderboard` commands."""

from __future__ import annotations

import typer

app = typer.Typer(help="leaderboard commands.", no_args_is_help=True)
