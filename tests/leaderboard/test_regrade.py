"""Re-grading: the server runs the hidden verifiers on submitted final workspaces in real bwrap sandboxes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from clawgym_env.bundle import make_bundle
from clawgym_env.capture.records import CallRecord
from clawgym_env.results import AttemptResult, RunManifest, attempt_filename
from clawgym_env.task import load_suite
from leaderboard.store import Store
from tests.leaderboard.conftest import post, serving

pytestmark = pytest.mark.sandbox

GRADE = {
    "answer": "def grade(transcript, ws):\n    import os\n    p = os.path.join(ws, 'out.txt')\n"
    "    ok = os.path.isfile(p) and open(p).read().strip() == '42'\n    return {'value': 1.0 if ok else 0.0}\n",
    "greet": "def grade(transcript, ws):\n    import os\n    p = os.path.join(ws, 'hello.txt')\n"
    "    ok = os.path.isfile(p) and open(p).read().strip() == 'hello'\n"
    "    said = 'done' in transcript['final_message']\n    return {'file': 1.0 if ok else 0.0, 'said': 1.0 if said else 0.0}\n",
}
CATEGORY = {"answer": "analysis", "greet": "content"}


def make_suite(root: Path) -> Path:
    """A two-task suite whose hidden graders exist only in this (the server's) folder."""
    root.mkdir(parents=True)
    (root / "suite.yaml").write_text("name: rg-suite\ndescription: re-grading test suite\npass_threshold: 1.0\n")
    for task, grade in GRADE.items():
        d = root / task
        (d / "workspace").mkdir(parents=True)
        (d / "workspace" / "README.txt").write_text("inputs\n")
        (d / "hidden").mkdir()
        (d / "hidden" / "grade.py").write_text(grade)
        (d / "task.yaml").write_text(
            f"id: {task}\nversion: 1\ncategory: {CATEGORY[task]}\ndifficulty: easy\ninstruction: do {task}\n"
            "workspace: workspace\nhidden: hidden\nverifiers:\n  - kind: code\n    file: hidden/grade.py\n"
            "limits: {wall_time_s: 60, model_calls: 4, memory_mb: 512}\n"
        )
    return root


# (task, attempt) -> files the agent left, and the final message it gave
LEFT = {
    ("answer", 0): ({"out.txt": "42\n"}, ""),
    ("answer", 1): ({"out.txt": "41\n"}, ""),
    ("greet", 0): ({"hello.txt": "hello\n"}, "done"),
    ("greet", 1): ({}, "done"),
}
TRUE_SCORES = {("answer", 0): 1.0, ("answer", 1): 0.0, ("greet", 0): 1.0, ("greet", 1): 0.5}


def write_run(root: Path, suite_hash: str, *, forged: bool, run_id: str = "rg-1") -> Path:
    """A results folder as `bench run --save-workspaces` leaves it; ``forged`` edits every score to 1.0."""
    (root / "attempts").mkdir(parents=True)
    (root / "captures").mkdir()
    manifest = RunManifest(
        run_id=run_id,
        created_at="2026-12-01T09:00:00+00:00",
        clawgym_version="0.1.0",
        suite="rg-suite",
        suite_hash=suite_hash,
        task_ids=[f"rg-suite/{t}" for t in GRADE],
        harnesses={"custom": "1"},
        model="hf:forger" if forged else "hf:honest",
        attempts=2,
        pass_threshold=1.0,
    )
    (root / "manifest.json").write_text(manifest.model_dump_json())
    for (task, k), (files, final) in LEFT.items():
        tid, sid = f"rg-suite/{task}", f"{run_id}-{task}-{k}"
        score = 1.0 if forged else TRUE_SCORES[(task, k)]
        rec = AttemptResult(
            task_id=tid,
            harness="custom",
            attempt=k,
            category=CATEGORY[task],
            score=score,
            status="passed" if score >= 1.0 else "failed",
            session_id=sid,
            subscores={"code/value": 0.0} if forged else {},
        )
        name = attempt_filename(tid, "custom", k)
        (root / "attempts" / name).write_text(rec.model_dump_json())
        ws = root / "workspaces" / name[:-5]
        ws.mkdir(parents=True)
        (ws / "README.txt").write_text("inputs\n")
        for rel, text in files.items():
            (ws / rel).write_text(text)
        call = CallRecord(
            session_id=sid,
            call_index=0,
            dialect="openai-chat",
            completion_text=final,
            messages=[{"role": "user", "content": f"do {task}"}],
            response={"role": "assistant", "content": final},
        )
        (root / "captures" / f"{sid}.jsonl").write_text(call.model_dump_json() + "\n")
    return root


@pytest.fixture
def rg_server(store: Store, tmp_path: Path) -> Iterator[tuple[str, str, Store, str]]:
    suite = load_suite(make_suite(tmp_path / "server-suites" / "rg-suite"))
    store.add_suite(
        suite.name,
        suite.content_hash,
        [t.full_id for t in suite.tasks],
        {t.full_id: t.category for t in suite.tasks},
        suite.pass_threshold,
        source_dir=str(suite.path),
    )
    token = store.add_submitter("rg")
    with serving(store) as url:
        yield url, token, store, suite.content_hash


def test_forged_scores_are_replaced_by_the_servers_and_the_disagreement_shown(rg_server, tmp_path: Path) -> None:
    url, token, store, suite_hash = rg_server
    r = post(url, token, make_bundle(write_run(tmp_path / "forged", suite_hash, forged=True)))
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["trust"] == "re-graded" and body["disagreements"] == 2
    assert body["metrics"]["pass_at"]["1"] == pytest.approx(0.5)  # the server's: 2 of 4 pass
    sub = httpx.get(f"{url}/api/submissions/{body['id']}").json()
    assert sub["claimed_metrics"]["overall"]["pass_at"]["1"] == pytest.approx(1.0)  # what was submitted
    by_key = {(a["task_id"], a["attempt"]): a for a in sub["attempts"]}
    assert by_key[("rg-suite/answer", 1)]["server_score"] == 0.0 and by_key[("rg-suite/answer", 1)]["score"] == 1.0
    assert by_key[("rg-suite/greet", 1)]["regrade"]["subscores"] == {"code/file": 0.0, "code/said": 1.0}
    assert by_key[("rg-suite/greet", 0)]["server_score"] == 1.0
    board = httpx.get(f"{url}/api/boards/rg-suite").json()
    assert board[0]["pass1"] == pytest.approx(0.5) and board[0]["claimed_pass1"] == pytest.approx(1.0)
    assert board[0]["trust"] == "re-graded" and board[0]["disagreements"] == 2
    page = httpx.get(f"{url}/submission/{body['id']}").text
    assert "2 of 4 attempts disagree" in page and "as submitted: Pass@1 100.0%" in page
    html = httpx.get(f"{url}/suite/rg-suite").text
    assert "2 disagree" in html and "claimed 100.0" in html


def test_an_honest_run_is_re_graded_without_disagreement(rg_server, tmp_path: Path) -> None:
    url, token, store, suite_hash = rg_server
    r = post(url, token, make_bundle(write_run(tmp_path / "honest", suite_hash, forged=False)))
    assert r.status_code == 201, r.text
    assert r.json()["trust"] == "re-graded" and r.json()["disagreements"] == 0
    assert r.json()["metrics"]["mean_score"] == pytest.approx(sum(TRUE_SCORES.values()) / 4)


def test_without_workspaces_the_row_is_self_reported(rg_server, tmp_path: Path) -> None:
    url, token, store, suite_hash = rg_server
    forged = write_run(tmp_path / "forged", suite_hash, forged=True)
    r = post(url, token, make_bundle(forged, include_workspaces=False))
    assert r.status_code == 422 and "sub-scores are at most 0.0" in r.json()["error"]  # the forgery, as it was
    for path in (forged / "attempts").glob("*.json"):  # a forger who also edits the sub-scores
        rec = json.loads(path.read_text())
        rec["subscores"] = {"code/value": 1.0}
        path.write_text(json.dumps(rec))
    r = post(url, token, make_bundle(forged, include_workspaces=False))
    assert r.status_code == 201 and r.json()["trust"] == "self-reported"
    rows = httpx.get(f"{url}/api/boards/rg-suite").json()
    assert rows[0]["trust"] == "self-reported" and rows[0]["pass1"] == 1.0
    html = httpx.get(f"{url}/suite/rg-suite", params={"trust": "re-graded"}).text
    assert "hf:forger" not in html and "No submissions match these filters" in html


def test_some_workspaces_missing_is_refused(rg_server, tmp_path: Path) -> None:
    url, token, store, suite_hash = rg_server
    run = write_run(tmp_path / "partial", suite_hash, forged=False)
    victim = next((run / "workspaces").iterdir())
    for f in victim.iterdir():
        f.unlink()
    victim.rmdir()
    r = post(url, token, make_bundle(run))
    assert r.status_code == 422 and "final workspaces for some attempts but not" in r.json()["error"]
    assert store.count() == (0, 0)


def test_the_agent_cannot_reach_the_hidden_grader_through_its_workspace(rg_server, tmp_path: Path) -> None:
    """A workspace that ships its own hidden/grade.py (or a verifier folder) changes nothing: the server's files win."""
    url, token, store, suite_hash = rg_server
    run = write_run(tmp_path / "sneaky", suite_hash, forged=True)
    for ws in (run / "workspaces").iterdir():
        (ws / "hidden").mkdir()
        (ws / "hidden" / "grade.py").write_text("def grade(t, w):\n    return {'value': 1.0}\n")
    r = post(url, token, make_bundle(run))
    assert r.status_code == 201 and r.json()["metrics"]["pass_at"]["1"] == pytest.approx(0.5)
    assert json.loads(json.dumps(r.json()))["disagreements"] == 2
