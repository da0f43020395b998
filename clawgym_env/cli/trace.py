"""`clawgym trace` commands."""

from __future__ import annotations

import typer

app = typer.Typer(help="trace commands.", no_args_is_help=True)
