"""The README's main command, for real: the embedded model as shipped and with its packaged adapter, on held-out tasks."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from clawgym_env.cli.main import app

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]


def test_bench_run_without_arguments_shows_the_trained_adapter_passing_held_out_tasks(tmp_path: Path) -> None:
    from clawgym_env.runner import load_attempts, load_manifest
    from clawgym_env.runner.first_run import SUITE, TASKS

    out = tmp_path / "first"
    r = CliRunner().invoke(app, ["bench", "run", "--out", str(out), "--no-progress"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    base, adapter = load_attempts(out / "base"), load_attempts(out / "adapter")
    assert load_manifest(out / "base").suite == SUITE and len(base) == len(adapter) == 13
    assert all(a.task_id.endswith(TASKS[1:]) for a in base)  # held-out variants *-01
    passed = sum(a.status == "passed" for a in adapter)
    assert passed > 0 and passed > sum(a.status == "passed" for a in base), r.output
    assert "Pass@1" in r.output and f"{100 * passed / 13:.1f}%" in r.output
