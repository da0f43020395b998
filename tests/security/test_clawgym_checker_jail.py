"""An imported ClawGym checker runs the agent's script with ``subprocess`` (9 of the 60 samples do).
Grading loads ``_agent_jail.jail_subprocess`` into the checker's interpreter first, so that script
runs in the grading jail: it cannot read the hidden ``check.py`` beside it nor use it as an oracle.

Sample task_0396's checker runs ``scripts/analyze_trials.py`` and compares its ``output/summary.json``
with values it computes itself. The attack script loads the hidden checker and writes the checker's
own expected values; it never computes anything, so its honest score is 0. On the tree before the
jail shim it scored 6/11 (the checker as oracle); in the jail the hidden file is an empty folder. The control computes the same summary honestly: it keeps its
credit in the jail (its outputs are written to the workspace), so the shim runs the script, not nothing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import shared_data_dir
from tests.security.conftest import Attack, bash, write

SCRIPT = "/root/.openclaw/workspace/scripts/analyze_trials.py"
"""The script the checker runs (imported read-only, as the dataset ships it: the agent makes it writable)."""
ORACLE = r"""
import json, os, sys
HIDDEN = "/root/.openclaw/workspace/reward/check.py"
ns = {"__name__": "leaked_checker"}
exec(compile(open(HIDDEN).read(), HIDDEN, "exec"), ns)  # the jail: no such file -> exit 1
from pathlib import Path
rows, _ = ns["_safe_read_csv_dicts"](Path(os.path.join("in" + "put", "farm" + "_trials.csv")))
os.makedirs("output", exist_ok=True)
json.dump(ns["_compute_expected_metrics"](rows), open(os.path.join("output", "summary.json"), "w"))
"""

HONEST = r"""
import csv, json, os
rows = list(csv.DictReader(open(os.path.join("in" + "put", "farm" + "_trials.csv"))))
def mean(xs):
    return sum(xs) / len(xs) if xs else None
wue = [(r["region"], r["method"], float(r["yield_kg_per_ha"]) / float(r["water_used_mm"])) for r in rows]
regions = sorted({g for g, _, _ in wue})
by = []
for g in regions:
    base = mean([w for r, m, w in wue if r == g and m == "conventional"])
    imp = mean([w for r, m, w in wue if r == g and m == "mulch_drip"])
    pct = (imp - base) / base * 100.0 if base and imp is not None else None
    by.append({"region": g, "baseline": base, "improved": imp, "percent_improvement": pct})
os.makedirs("output", exist_ok=True)
json.dump({"overall_avg_wue": mean([w for _, _, w in wue]), "improvement_by_region": by, "regions": regions},
          open(os.path.join("output", "summary.json"), "w"))
"""
"""The same summary computed from the input: what the jailed script may still earn (7/11)."""


@pytest.fixture(scope="module")
def suite_0396(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from clawgym_env.authoring.importers import import_suite

    src = tmp_path_factory.mktemp("cg-src")
    shutil.copytree(shared_data_dir() / "clawgym-sample" / "task_0396", src / "task_0396")
    return import_suite("clawgym", src, "cg-checker", tmp_path_factory.mktemp("cg-suite")).path


async def test_agent_script_run_by_a_clawgym_checker_cannot_use_the_hidden_checker(backend: str, attack: Attack, suite_0396: Path) -> None:
    _, rec = await attack(suite_0396, "task-0396", [bash(f"chmod -R u+w {SCRIPT.rsplit('/', 2)[0]}"), write(SCRIPT, ORACLE)], backend)
    assert rec.score == 0.0, rec.verifier_output
    assert rec.status == "failed" and not rec.error, rec.error


async def test_honest_script_keeps_its_credit_in_the_jail(backend: str, attack: Attack, suite_0396: Path) -> None:
    _, rec = await attack(suite_0396, "task-0396", [bash(f"chmod -R u+w {SCRIPT.rsplit('/', 2)[0]}"), write(SCRIPT, HONEST)], backend)
    assert abs(rec.score - 7 / 11) < 1e-9, rec.verifier_output
