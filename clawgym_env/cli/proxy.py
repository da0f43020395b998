"""`clawgym proxy` commands."""

from __future__ import annotations

import typer

app = typer.Typer(help="proxy commands.", no_args_is_help=True)
