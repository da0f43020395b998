"""Hostile archives are refused as their headers arrive: the reader itself, then a real server process under psutil."""

from __future__ import annotations

import io
import tarfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from clawgym_env.bundle import BundleLimits, make_bundle, read_bundle
from clawgym_env.errors import LeaderboardError
from leaderboard.store import Store
from tests.leaderboard import bombs
from tests.leaderboard.conftest import SUITE, SUITE_HASH, TASKS, free_port, post, post_many, write_results
from tests.leaderboard.test_durability import _start

REASONS = {
    "8 GiB member": "the limit per member",
    "ratio bomb (300 x 30 MiB)": "compression bomb",
    "500 MiB pax header": "extended tar header",
    "500 MiB sparse member": "sparse file",
}


@pytest.mark.parametrize("name", sorted(bombs.ALL))
def test_reader_refuses_each_bomb_by_its_header(name: str) -> None:
    with pytest.raises(LeaderboardError, match=REASONS[name]):
        read_bundle(bombs.ALL[name]())


def test_ratio_is_judged_on_the_stream_not_after_it() -> None:
    """A ratio bomb is stopped after a few MiB of output although every member is under the limits."""
    limits = BundleLimits(max_ratio=100, ratio_grace_bytes=1024 * 1024)
    with pytest.raises(LeaderboardError, match="inflates"):
        read_bundle(bombs.ratio_bomb(members=4, each=20 * 1024 * 1024), limits)


def test_members_after_the_first_bad_one_are_never_read(tmp_path: Path) -> None:
    good = make_bundle(write_results(tmp_path / "run"))
    src = tarfile.open(fileobj=io.BytesIO(good), mode="r:gz")
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as dst:
        bad = tarfile.TarInfo("etc/passwd")
        bad.size = 1
        dst.addfile(bad, io.BytesIO(b"x"))
        for m in src.getmembers():
            dst.addfile(m, src.extractfile(m))
    with pytest.raises(LeaderboardError, match="'etc/passwd' is not allowed"):
        read_bundle(out.getvalue())


def test_workspace_members_may_not_climb_out(tmp_path: Path) -> None:
    for name in ("workspaces/x__custom__0/../../../etc/cron.d/x", "workspaces/x__custom__0//abs", "workspaces/../x"):
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w:gz") as tar:
            info = tarfile.TarInfo(name)
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
        with pytest.raises(LeaderboardError, match="not allowed"):
            read_bundle(out.getvalue())


@contextmanager
def server_process_in(folder: Path) -> Iterator[tuple[str, str, psutil.Process]]:
    """`clawgym leaderboard serve` in its own process, so its CPU time and memory can be read."""
    db = f"sqlite:///{folder / 'lb.db'}"
    store = Store(db)
    store.add_suite(SUITE, SUITE_HASH, list(TASKS), TASKS, 1.0)
    token = store.add_submitter("mallory")
    port = free_port()
    proc = _start(db, port)
    try:
        yield f"http://127.0.0.1:{port}", token, psutil.Process(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def server_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, psutil.Process]]:
    """One server for the module: every bomb is refused, so none changes what the next one meets."""
    with server_process_in(tmp_path_factory.mktemp("bombs")) as found:
        yield found


def _measure(proc: psutil.Process, send) -> tuple[float, float, list[int]]:  # type: ignore[no-untyped-def]
    """(server CPU seconds, peak extra RSS in MB, status codes) for what ``send()`` does."""
    peak = base = proc.memory_info().rss
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, proc.memory_info().rss)
            time.sleep(0.005)

    watcher = threading.Thread(target=sample)
    watcher.start()
    cpu0 = sum(proc.cpu_times()[:2])
    try:
        codes = send()
    finally:
        time.sleep(0.05)
        done.set()
        watcher.join()
    return sum(proc.cpu_times()[:2]) - cpu0, (peak - base) / 1e6, codes


@pytest.mark.parametrize("name", sorted(bombs.ALL))
def test_server_refuses_bombs_within_the_budget(server_process, name: str) -> None:
    """The issue's budget per bomb: under 2 s of server CPU and under 100 MB of extra RSS."""
    url, token, proc = server_process
    data = bombs.ALL[name]()
    post(url, token, make_bundle_once())  # warm the server up (imports, first connection) before measuring
    cpu, rss, codes = _measure(proc, lambda: [post(url, token, data).status_code])
    assert codes == [422]
    assert cpu < 2.0, f"{name}: {cpu:.2f} s of server CPU"
    assert rss < 100, f"{name}: {rss:.0f} MB extra RSS"


def test_eight_sparse_bundles_at_once_stay_small(server_process) -> None:
    url, token, proc = server_process
    data = bombs.sparse_bundle()
    post(url, token, make_bundle_once())

    cpu, rss, codes = _measure(proc, lambda: post_many(url, token, data, 8))
    assert codes == [422] * 8
    assert cpu < 2.0 and rss < 100, (cpu, rss)


_WARM: list[bytes] = []


def make_bundle_once() -> bytes:
    """A small valid bundle: the first upload warms the server (imports, first connection) before measuring."""
    if not _WARM:
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            _WARM.append(make_bundle(write_results(Path(d) / "w", run_id="warm")))
    return _WARM[0]
