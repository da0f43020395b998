"""The proxy raises the cyclic GC's young threshold once per process, never lowering a host's own setting."""

from __future__ import annotations

import gc

import pytest

from clawgym_env.proxy import ProxyServer, server


@pytest.mark.parametrize(("host", "after"), [(700, server.GC_YOUNG_THRESHOLD), (50_000, 50_000), (0, 0)])
def test_first_start_tunes_the_young_threshold_once(host: int, after: int, monkeypatch: pytest.MonkeyPatch) -> None:
    saved = gc.get_threshold()
    monkeypatch.setattr(server, "_FROZEN", [])  # as if no proxy had started in this process yet
    try:
        gc.set_threshold(host, 10, 10)
        server._tune_gc()
        assert gc.get_threshold() == (after, 10, 10)
        gc.set_threshold(700, 10, 10)
        server._tune_gc()  # once per process: a second start leaves the threshold alone
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.set_threshold(*saved)


async def test_a_started_server_runs_with_the_raised_threshold() -> None:
    async with ProxyServer():
        assert gc.get_threshold()[0] >= server.GC_YOUNG_THRESHOLD
