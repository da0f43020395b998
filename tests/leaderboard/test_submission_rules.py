"""The failures issue 18 reported, replayed with the same inputs against a real server (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from sqlalchemy import inspect, select

from clawgym_env.bundle import make_bundle
from leaderboard.store import CaptureRow, SubmissionRow
from tests.leaderboard.conftest import SUITE, TASKS, post, post_many, write_results
from tests.leaderboard.test_api import _edit_json, _rebundle


@pytest.mark.parametrize("k", [5, 6, 10])
def test_runs_with_many_attempts_are_accepted_with_every_pass_at_k(server, tmp_path: Path, k: int) -> None:
    """k >= 6 used to be refused: the server's Pass@k list disagreed with the one make_bundle writes."""
    url, token, store = server
    r = post(url, token, make_bundle(write_results(tmp_path / "run", k=k, harnesses=("custom",))))
    assert r.status_code == 201, r.text
    summary = json.loads(_member(make_bundle(write_results(tmp_path / "again", k=k, harnesses=("custom",))), "summary.json"))
    stored = store.submission(r.json()["id"]).metrics["overall"]["pass_at"]
    assert set(stored) == set(summary["overall"]["pass_at"]) and str(k) in stored
    assert all(stored[key] == pytest.approx(v) for key, v in summary["overall"]["pass_at"].items())


def _member(data: bytes, name: str) -> bytes:
    import io
    import tarfile

    return tarfile.open(fileobj=io.BytesIO(data), mode="r:gz").extractfile(name).read()


def test_sixteen_concurrent_posts_of_one_bundle_are_accepted_once(server, tmp_path: Path) -> None:
    url, token, store = server
    for rnd in range(3):
        data = make_bundle(write_results(tmp_path / f"r{rnd}", run_id=f"r{rnd}", model=f"m{rnd}"))
        codes = post_many(url, token, data, 16)
        assert codes == [201] + [422] * 15, codes
    assert store.count() == (3, 36)


def test_the_same_results_under_another_run_id_are_refused(server, tmp_path: Path) -> None:
    url, token, store = server
    data = make_bundle(write_results(tmp_path / "run"))
    first = post(url, token, data)
    assert first.status_code == 201
    renamed = _rebundle(data, _edit_json("", "manifest.json", lambda m: m.update(run_id="run-2", created_at="2026-12-01T00:00:00+00:00")))
    again = post(url, token, renamed)
    assert again.status_code == 422 and f"already submitted (submission {first.json()['id']})" in again.json()["error"]
    assert store.count() == (1, 12)
    # a different result set (one score changed) is a new row
    other = make_bundle(write_results(tmp_path / "other", run_id="run-3", scores={("lb-suite/alpha", "custom", 1): 1.0}))
    assert post(url, token, other).status_code == 201


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda m: m.update(model="m" * 10_000), "model"),
        (lambda m: m.update(run_id="r" * 1000), "run_id"),
        (lambda m: m.update(harnesses={"custom": "1.0", "claude-code": "v" * 500}), "harnesses"),
    ],
)
def test_oversized_manifest_fields_are_refused_by_validation(server, tmp_path: Path, edit, field: str) -> None:
    url, token, store = server
    data = _rebundle(make_bundle(write_results(tmp_path / "run")), _edit_json("", "manifest.json", edit))
    r = post(url, token, data)
    assert r.status_code == 422
    assert "manifest.json: invalid SubmittedManifest" in r.json()["error"] and field in r.json()["error"]
    assert store.count() == (0, 0)


def test_oversized_attempt_fields_are_refused(server, tmp_path: Path) -> None:
    url, token, store = server
    good = make_bundle(write_results(tmp_path / "run"))
    first = sorted(n for n in _names(good) if n.startswith("attempts/"))[0]
    r = post(url, token, _rebundle(good, _edit_json("", first, lambda a: a.update(verifier_output="x" * 100_000))))
    assert r.status_code == 422 and "verifier_output" in r.json()["error"]
    r = post(url, token, _rebundle(good, _edit_json("", first, lambda a: a.update(session_id="../../etc"))))
    assert r.status_code == 422 and "session_id" in r.json()["error"]


def _names(data: bytes) -> list[str]:
    import io
    import tarfile

    return tarfile.open(fileobj=io.BytesIO(data), mode="r:gz").getnames()


def test_captures_live_apart_and_the_board_never_reads_them(server, tmp_path: Path) -> None:
    url, token, store = server
    results = write_results(tmp_path / "run")
    big = next((results / "captures").glob("*.jsonl"))
    line = json.loads(big.read_text())
    line["completion_text"] = "y" * (3 * 1024 * 1024)  # a 3 MiB call: large but allowed
    big.write_text(json.dumps(line) + "\n")
    r = post(url, token, make_bundle(results))
    assert r.status_code == 201, r.text
    assert "captures" not in {c["name"] for c in inspect(store.engine).get_columns("submissions")}
    with store.session() as s:
        assert len(list(s.scalars(select(CaptureRow.session_id).where(CaptureRow.submission_id == r.json()["id"])))) == 12
    sub = store.submissions(SUITE)[0]
    assert isinstance(sub, SubmissionRow) and "attempts" not in sub.__dict__  # ranking rows only
    board = httpx.get(f"{url}/suite/{SUITE}")
    assert board.status_code == 200 and len(board.content) < 100_000
    traj = httpx.get(f"{url}/submission/{r.json()['id']}/trajectory/{big.stem}")
    assert traj.status_code == 200 and "yyyy" in traj.text


def test_a_capture_line_past_the_limit_is_refused(server, tmp_path: Path) -> None:
    """The 107 KB upload holding a 100 MiB capture line."""
    url, token, store = server
    results = write_results(tmp_path / "run")
    cap = next((results / "captures").glob("*.jsonl"))
    with cap.open("w") as fh:
        fh.write('{"session_id": "s", "completion_text": "')
        for _ in range(100):
            fh.write("z" * (1024 * 1024))
        fh.write('"}\n')
    data = make_bundle(results)
    assert len(data) < 400_000
    r = post(url, token, data)
    assert r.status_code == 422 and "captures/" in r.json()["error"], r.text
    assert store.count() == (0, 0)


def test_two_suite_versions_are_ranked_apart_and_filtered(server, tmp_path: Path) -> None:
    url, token, store = server
    new_hash = "cd" * 32
    store.add_suite(SUITE, new_hash, list(TASKS), TASKS, 1.0)
    old = make_bundle(write_results(tmp_path / "old", run_id="old", model="model-old"))
    new = _rebundle(
        make_bundle(write_results(tmp_path / "new", run_id="new", model="model-new")),
        _edit_json("", "manifest.json", lambda m: m.update(suite_hash=new_hash)),
    )
    assert post(url, token, old).status_code == 201
    assert post(url, token, new).status_code == 201
    rows = httpx.get(f"{url}/api/boards/{SUITE}").json()
    assert {r["suite_version"] for r in rows} == {"ab" * 6, "cd" * 6}
    assert sorted(r["rank"] for r in rows) == [1, 1, 1, 1]  # every row is first in its own version
    only_new = httpx.get(f"{url}/api/boards/{SUITE}", params={"version": "cd" * 6}).json()
    assert {r["model"] for r in only_new} == {"model-new"}
    page = httpx.get(f"{url}/suite/{SUITE}", params={"version": "ab" * 6}).text
    assert "model-old" in page and "model-new" not in page and 'id="version-filter"' in page
    assert httpx.get(f"{url}/api/boards/{SUITE}", params={"version": "ef" * 6}).status_code == 404
