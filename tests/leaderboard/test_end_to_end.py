"""A real `bench run` results folder goes all the way onto the board, numbers recomputed."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from clawgym_env._sync import run_sync
from clawgym_env.bundle import make_bundle
from clawgym_env.runner import RunConfig, run_benchmark
from clawgym_env.task import load_suite
from tests.leaderboard.conftest import post

pytestmark = pytest.mark.sandbox


def test_real_run_is_submitted_and_ranked(server, tmp_path: Path) -> None:
    url, token, store = server
    suite = load_suite("officeqa-mini")
    store.add_suite(
        suite.name, suite.content_hash, [t.full_id for t in suite.tasks], {t.full_id: t.category for t in suite.tasks}, suite.pass_threshold
    )
    policy = tmp_path / "policy.yaml"
    policy.write_text('default: "I could not find it."\n')
    summary = run_sync(
        run_benchmark(
            RunConfig(
                model=f"scripted:{policy}",
                harnesses=["custom"],
                suite="officeqa-mini",
                attempts=2,
                concurrency=4,
                out=str(tmp_path / "run"),
            ),
            progress=False,
        )
    )
    assert summary.ran == 2 * len(suite.tasks)
    r = post(url, token, make_bundle(summary.out_dir))
    assert r.status_code == 201, r.text
    board = httpx.get(f"{url}/api/boards/officeqa-mini").json()
    assert len(board) == 1 and board[0]["harness"] == "custom" and board[0]["attempts"] == 2 * len(suite.tasks)
    assert board[0]["pass1"] == pytest.approx(summary.metrics.overall.pass_at[1])
    assert board[0]["pass1"] == 0.0  # the scripted policy never answers
    sub = httpx.get(f"{url}/api/submissions/{r.json()['id']}").json()
    assert {a["task_id"] for a in sub["attempts"]} == {t.full_id for t in suite.tasks}
    # The selection of a run must be the whole registered suite.
    partial = tmp_path / "partial"
    summary2 = run_sync(
        run_benchmark(
            RunConfig(model=f"scripted:{policy}", harnesses=["custom"], suite="officeqa-mini", tasks=suite.tasks[0].id, out=str(partial)),
            progress=False,
        )
    )
    refused = post(url, token, make_bundle(summary2.out_dir))
    assert refused.status_code == 422 and "missing task" in refused.json()["error"]
    assert json.loads((summary.out_dir / "manifest.json").read_text())["suite_hash"] == suite.content_hash
