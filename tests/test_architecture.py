"""The package layout stays true to the data flow: the core never imports its plug-ins."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    r = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 broken" in r.stdout


def test_console_script_runs() -> None:
    r = subprocess.run([sys.executable, "-m", "clawgym_env.cli.main", "version"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == __import__("clawgym_env").__version__
