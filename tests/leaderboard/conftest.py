"""Fixtures: a results folder in the `clawgym bench run` format, and a live leaderboard server."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn

from clawgym_env.capture.records import CallRecord
from clawgym_env.results import AttemptResult, RunManifest, attempt_filename
from leaderboard.app import create_app
from leaderboard.store import Store
from tests.leaderboard.postgres import postgres_cluster, postgres_database

SUITE = "lb-suite"
SUITE_HASH = "ab" * 32
TASKS = {"lb-suite/alpha": "analysis", "lb-suite/beta": "content", "lb-suite/gamma": "analysis"}


def write_results(
    root: Path,
    *,
    model: str = "hf:tiny",
    run_id: str = "run-1",
    harnesses: tuple[str, ...] = ("custom", "claude-code"),
    k: int = 2,
    scores: dict[tuple[str, str, int], float] | None = None,
) -> Path:
    """Write a results folder the way the runner does (manifest, one JSON per attempt, captures)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "attempts").mkdir(exist_ok=True)
    (root / "captures").mkdir(exist_ok=True)
    manifest = RunManifest(
        run_id=run_id,
        created_at="2026-11-30T12:00:00+00:00",
        clawgym_version="0.1.0",
        suite=SUITE,
        suite_hash=SUITE_HASH,
        task_ids=list(TASKS),
        harnesses={h: "1.0" for h in harnesses},
        model=model,
        attempts=k,
        pass_threshold=1.0,
    )
    (root / "manifest.json").write_text(manifest.model_dump_json(indent=1))
    for i, (task, cat) in enumerate(TASKS.items()):
        for h in harnesses:
            for a in range(k):
                score = (scores or {}).get((task, h, a), 1.0 if (i + a) % 2 == 0 else 0.25)
                sid = f"{run_id}-{i}-{h}-{a}"
                rec = AttemptResult(
                    task_id=task,
                    harness=h,
                    attempt=a,
                    category=cat,
                    score=score,
                    status="passed" if score >= 1.0 else "failed",
                    session_id=sid,
                    model_calls=1,
                )
                (root / "attempts" / attempt_filename(task, h, a)).write_text(rec.model_dump_json())
                call = CallRecord(
                    session_id=sid,
                    call_index=0,
                    dialect="openai-chat",
                    completion_text=f"answer {sid}",
                    messages=[{"role": "user", "content": "do the task"}],
                )
                (root / "captures" / f"{sid}.jsonl").write_text(call.model_dump_json() + "\n")
    return root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def pg_socket() -> Iterator[str]:
    """One PostgreSQL cluster for the session (started here; nothing else runs one)."""
    with postgres_cluster() as sock:
        yield sock


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Every store test runs on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'lb.db'}"
        return
    with postgres_database(request.getfixturevalue("pg_socket")) as url:
        yield url


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    st = Store(db_url)
    st.add_suite(SUITE, SUITE_HASH, list(TASKS), TASKS, 1.0)
    yield st
    st.engine.dispose()


@contextmanager
def serving(store: Store) -> Iterator[str]:
    """A real uvicorn server on 127.0.0.1 around ``store``; yields its URL."""
    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(create_app(store), host="127.0.0.1", port=port, log_level="warning"))
    th = threading.Thread(target=srv.run, daemon=True)
    th.start()
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            httpx.get(url + "/api/suites", timeout=1)
            break
        except httpx.TransportError:
            time.sleep(0.05)
    try:
        yield url
    finally:
        srv.should_exit = True
        th.join(timeout=10)


@pytest.fixture
def server(store: Store) -> Iterator[tuple[str, str, Store]]:
    """A real uvicorn server on 127.0.0.1; yields (url, submitter token, store)."""
    token = store.add_submitter("alice")
    with serving(store) as url:
        yield url, token, store


def post(url: str, token: str, data: bytes) -> httpx.Response:
    return httpx.post(
        url + "/api/submissions", content=data, timeout=60, headers={"authorization": f"Bearer {token}", "content-type": "application/gzip"}
    )


def post_many(url: str, token: str, data: bytes, n: int) -> list[int]:
    """Post ``data`` from ``n`` threads released together; the status codes, sorted."""
    codes: list[int] = []
    lock = threading.Lock()
    go = threading.Barrier(n)

    def send() -> None:
        go.wait()
        code = post(url, token, data).status_code
        with lock:
            codes.append(code)

    threads = [threading.Thread(target=send) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return sorted(codes)


def load(path: Path) -> dict:  # type: ignore[type-arg]
    return json.loads(path.read_text())
