"""`clawgym harness` commands."""

from __future__ import annotations

import typer

app = typer.Typer(help="harness commands.", no_args_is_help=True)
