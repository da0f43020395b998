"""Two concurrent submitters and a server killed mid-submission lose nothing committed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from clawgym_env.bundle import make_bundle
from leaderboard.store import Store
from tests.leaderboard.conftest import SUITE, SUITE_HASH, TASKS, free_port, post, write_results


def _start(db: str, port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "clawgym_env.cli.main", "leaderboard", "serve", "--db", db, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(200):
        try:
            httpx.get(f"http://127.0.0.1:{port}/api/suites", timeout=1)
            return proc
        except httpx.TransportError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("leaderboard server did not come up")


def test_concurrent_submitters_and_restart_lose_nothing(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'lb.db'}"
    store = Store(db)
    store.add_suite(SUITE, SUITE_HASH, list(TASKS), TASKS, 1.0)
    tokens = [store.add_submitter("alice"), store.add_submitter("bob")]
    bundles = {
        (who, i): make_bundle(write_results(tmp_path / f"{who}-{i}", run_id=f"{who}-run-{i}", model=f"m-{who}-{i}"))
        for who in range(2)
        for i in range(6)
    }
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = _start(db, port)
    accepted: list[str] = []
    lock = threading.Lock()

    def submitter(who: int) -> None:
        for i in range(6):
            try:
                r = post(url, tokens[who], bundles[(who, i)])
            except httpx.TransportError:
                continue  # the server was killed under this request
            if r.status_code == 201:
                with lock:
                    accepted.append(r.json()["id"])

    threads = [threading.Thread(target=submitter, args=(w,)) for w in range(2)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while len(accepted) < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)  # restart while the submitters are still sending
    at_kill = len(accepted)
    assert 2 <= at_kill < 12
    proc.wait()
    proc = _start(db, port)
    for t in threads:
        t.join(timeout=120)
    try:
        # Everything that was acknowledged is there, whole; a retry of anything lost goes through.
        after = Store(db)
        for sub_id in accepted:
            sub = after.submission(sub_id)
            assert sub is not None and len(sub.attempts) == 12
        subs, attempts = after.count()
        assert attempts == 12 * subs  # no half-written submission
        for (who, i), data in bundles.items():
            r = post(url, tokens[who], data)
            assert r.status_code in (201, 422), r.text
            if r.status_code == 422:
                assert "already submitted" in r.json()["error"]
        assert after.count() == (12, 144)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
