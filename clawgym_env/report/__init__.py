"""Reports of a results folder: the live progress, a terminal table, one self-contained HTML file."""

from __future__ import annotations

from clawgym_env.report.html import write_html
from clawgym_env.report.table import (
    compare_table,
    print_compare,
    print_report,
    print_runs,
    runs_table,
    summary_tables,
)

__all__ = ["compare_table", "print_compare", "print_report", "print_runs", "runs_table", "summary_tables", "write_html"]
