"""Submissions through the real server: accepted with recomputed numbers, or refused leaving the store unchanged."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from clawgym_env.bundle import make_bundle
from tests.leaderboard.conftest import post, write_results


def _rebundle(data: bytes, edit) -> bytes:  # type: ignore[no-untyped-def]
    """Unpack a bundle, let ``edit(name, bytes) -> bytes | None`` change members, repack."""
    src = tarfile.open(fileobj=io.BytesIO(data), mode="r:gz")
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as dst:
        for m in src.getmembers():
            raw = edit(m.name, src.extractfile(m).read())
            if raw is None:
                continue
            info = tarfile.TarInfo(m.name)
            info.size = len(raw)
            dst.addfile(info, io.BytesIO(raw))
    return out.getvalue()


def test_valid_submission_is_listed_with_recomputed_numbers(server, tmp_path: Path) -> None:
    url, token, store = server
    r = post(url, token, make_bundle(write_results(tmp_path / "run")))
    assert r.status_code == 201, r.text
    sub_id = r.json()["id"]
    import httpx

    board = httpx.get(f"{url}/api/boards/lb-suite").json()
    assert {row["harness"] for row in board} == {"custom", "claude-code"}
    # 3 tasks x 2 attempts per harness; attempt passes when (task index + attempt) is even -> 3 of 6.
    assert all(row["pass1"] == pytest.approx(0.5) for row in board)
    assert all(row["mean"] == pytest.approx((3 * 1.0 + 3 * 0.25) / 6) for row in board)
    detail = httpx.get(f"{url}/api/submissions/{sub_id}").json()
    assert len(detail["attempts"]) == 12
    page = httpx.get(f"{url}/submission/{sub_id}")
    assert page.status_code == 200 and "lb-suite/alpha" in page.text
    traj = httpx.get(f"{url}/submission/{sub_id}/trajectory/run-1-0-custom-0")
    assert traj.status_code == 200 and "answer run-1-0-custom-0" in traj.text


def _edit_json(name: str, member: str, change):  # type: ignore[no-untyped-def]
    def edit(n: str, raw: bytes) -> bytes:
        if n != member:
            return raw
        d = json.loads(raw)
        change(d)
        return json.dumps(d).encode()

    return edit


def _first_attempt(data: bytes) -> str:
    return sorted(n for n in tarfile.open(fileobj=io.BytesIO(data), mode="r:gz").getnames() if n.startswith("attempts/"))[0]


TAMPERS = {
    "edited aggregate": (
        lambda d: _edit_json("", "summary.json", lambda s: s["overall"]["pass_at"].update({"1": 0.99})),
        "summary.json claims pass@1",
    ),
    "status lies": (
        lambda d: _edit_json("", _first_attempt(d), lambda a: a.update(status="passed", score=0.5)),
        "says passed but its score",
    ),
    "forged score, sub-scores still 0": (
        lambda d: _edit_json("", _first_attempt(d), lambda a: a.update(status="passed", score=1.0, subscores={"code/value": 0.0})),
        "its sub-scores are at most 0.0",
    ),
    "score out of range": (lambda d: _edit_json("", _first_attempt(d), lambda a: a.update(score=1.5)), "less than or equal to 1"),
    "missing task": (lambda d: lambda n, raw: None if n == _first_attempt(d) else raw, "attempts missing"),
    "wrong suite hash": (lambda d: _edit_json("", "manifest.json", lambda m: m.update(suite_hash="cd" * 32)), "not a registered version"),
    "unknown suite": (lambda d: _edit_json("", "manifest.json", lambda m: m.update(suite="nope")), "unknown suite"),
}


@pytest.mark.parametrize("case", sorted(TAMPERS))
def test_tampered_submission_is_refused_and_store_unchanged(server, tmp_path: Path, case: str) -> None:
    url, token, store = server
    good = make_bundle(write_results(tmp_path / "run"))
    make_edit, reason = TAMPERS[case]
    before = store.count()
    r = post(url, token, _rebundle(good, make_edit(good)))
    assert r.status_code == 422, r.text
    assert reason in r.json()["error"]
    assert store.count() == before


def _tar_with(members: list[tarfile.TarInfo], payload: bytes = b"x") -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for info in members:
            tar.addfile(info, io.BytesIO(payload) if info.isfile() else None)
    return out.getvalue()


@pytest.mark.parametrize(
    "member,reason",
    [("../../etc/passwd", "not allowed"), ("/abs/manifest.json", "not allowed"), ("attempts/../../x.json", "not allowed")],
)
def test_path_traversal_archive_is_refused(server, member: str, reason: str) -> None:
    url, token, store = server
    info = tarfile.TarInfo(member)
    info.size = 1
    r = post(url, token, _tar_with([info]))
    assert r.status_code == 422 and reason in r.json()["error"]
    assert store.count() == (0, 0)


def test_symlink_member_is_refused(server) -> None:
    url, token, store = server
    link = tarfile.TarInfo("manifest.json")
    link.type = tarfile.SYMTYPE
    link.linkname = "/etc/passwd"
    r = post(url, token, _tar_with([link]))
    assert r.status_code == 422 and "not a regular file" in r.json()["error"]


def test_oversized_body_is_refused(server) -> None:
    url, token, store = server
    r = post(url, token, b"\0" * (64 * 1024 * 1024 + 1))
    assert r.status_code == 413
    assert store.count() == (0, 0)


def test_bad_token_is_refused(server, tmp_path: Path) -> None:
    url, _token, store = server
    r = post(url, "cgl_not-a-token", make_bundle(write_results(tmp_path / "run")))
    assert r.status_code == 401 and "token" in r.json()["error"]
    assert store.count() == (0, 0)


def test_duplicate_run_is_refused(server, tmp_path: Path) -> None:
    url, token, store = server
    data = make_bundle(write_results(tmp_path / "run"))
    assert post(url, token, data).status_code == 201
    again = post(url, token, data)
    assert again.status_code == 422 and "already submitted" in again.json()["error"]
    assert store.count() == (1, 12)


def test_garbage_body_is_refused(server) -> None:
    url, token, store = server
    r = post(url, token, b"this is not a tarball")
    assert r.status_code == 422 and "gzipped tar" in r.json()["error"]
