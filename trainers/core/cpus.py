"""CPU partitioning of a trainer (``--trainer_cpus``, ``--rollout_cpus``): the training thread keeps its cores.

Why: with ``--async_rollouts`` on a machine that trains and samples on the same CPUs, the rollout
side (the proxy and executor on their event loop, the policy child, harness and sandbox
processes) is runnable at the same time as the training thread; the scheduler shares the cores
among all of them, and the trainer, whose step is the async step, waits for a core (measured on
the 2-core demo: 0.8-1.0 s a step runnable without a core). A deployment with its own sampling
hardware never has that contest; pinning gives the CPU demo the same shape. Linux affinity is
per thread and inherited by the threads and processes a thread starts, so the rollout side's
threads and processes are created on ``rollout_cpus`` (the event loop thread, then everything it
spawns: sandboxes, harnesses, its worker threads) and the thread that calls ``train()`` runs on
``trainer_cpus`` while it trains.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from clawgym_env.errors import ConfigError

__all__ = ["on_cpus", "parse_cpus", "pin_thread", "thread_cpus"]


def parse_cpus(value: str, field: str) -> frozenset[int]:
    """A Linux CPU list (``"1"``, ``"0,2"``, ``"2-5"``) as a set of CPU ids this process may run on."""
    if not hasattr(os, "sched_setaffinity"):
        raise ConfigError(f"{field}={value!r}: CPU affinity needs Linux (os.sched_setaffinity); drop --{field}")
    cpus: set[int] = set()
    try:
        for part in str(value).split(","):
            lo, _, hi = part.strip().partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise ConfigError(f"{field}={value!r}: set a CPU list such as '0', '1-3' or '0,2'") from None
    allowed = os.sched_getaffinity(0)
    if not cpus or not cpus <= allowed:
        raise ConfigError(
            f"{field}={value!r}: CPUs {sorted(cpus - allowed) or '(none)'} are not among those this process "
            f"may use ({sorted(allowed)}); set a subset of them"
        )
    return frozenset(cpus)


def thread_cpus(native_id: int | None = None) -> frozenset[int]:
    """The CPUs a thread (this one by default; any by its native id) may run on."""
    return frozenset(os.sched_getaffinity(native_id if native_id is not None else 0))


def pin_thread(cpus: frozenset[int]) -> None:
    """Put the calling thread (only it: Linux affinity is per thread) on ``cpus``."""
    os.sched_setaffinity(0, cpus)


@contextmanager
def on_cpus(cpus: frozenset[int] | None) -> Iterator[None]:
    """Run the calling thread on ``cpus`` inside the block (threads and processes it starts there inherit them).

    ``None``: no change. The thread's own CPUs come back afterwards.
    """
    if cpus is None:
        yield
        return
    before = thread_cpus()
    pin_thread(cpus)
    try:
        yield
    finally:
        pin_thread(before)
