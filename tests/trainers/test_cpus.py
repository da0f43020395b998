"""``--trainer_cpus`` / ``--rollout_cpus``: the training thread and the rollout side each on their own CPUs."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import psutil
import pytest

from clawgym_env.errors import ConfigError
from tests.trainers.conftest import make_config
from trainers.core.cpus import on_cpus, parse_cpus, thread_cpus
from trainers.tree_grpo.trainer import TreeGRPOTrainer

CPUS = sorted(os.sched_getaffinity(0))
TRAIN, ROLL = frozenset(CPUS[:1]), frozenset(CPUS[1:] or CPUS)  # one CPU box: both on it (placement still checked)


def test_cpu_lists_parse_and_bad_ones_name_the_field(tmp_path: Path) -> None:
    c = CPUS[-1]
    assert parse_cpus(f"{c}", "rollout_cpus") == {c}
    assert parse_cpus(",".join(map(str, CPUS)), "x") == set(CPUS)
    if CPUS == list(range(CPUS[0], CPUS[-1] + 1)):
        assert parse_cpus(f"{CPUS[0]}-{CPUS[-1]}", "x") == set(CPUS)
    with pytest.raises(ConfigError, match="trainer_cpus='a-b': set a CPU list"):
        make_config(tmp_path, trainer_cpus="a-b")
    with pytest.raises(ConfigError, match=r"rollout_cpus='4096'.*not among those this process may use"):
        make_config(tmp_path, rollout_cpus="4096")
    with pytest.raises(ConfigError, match="placed by Ray"):
        make_config(tmp_path, rollout_cpus=str(c), executor="ray")
    assert make_config(tmp_path, trainer_cpus=str(CPUS[0]), rollout_cpus=str(c)).cpu_sets() == ({CPUS[0]}, {c})


def test_threads_started_on_cpus_keep_them_and_the_caller_gets_its_own_back() -> None:
    before, seen = thread_cpus(), {}

    def record() -> None:
        seen["cpus"] = thread_cpus()

    with on_cpus(ROLL):
        assert thread_cpus() == ROLL
        t = threading.Thread(target=record)
        t.start()
    t.join()
    assert seen["cpus"] == ROLL and thread_cpus() == before


class _Watch:
    """Polls the trainer process's descendants and rollout threads while it trains: which CPUs each may use."""

    def __init__(self, trainer: TreeGRPOTrainer, earlier: set[int]) -> None:
        self.trainer, self.stop = trainer, threading.Event()
        self.earlier = earlier  # processes started before the trainer (an earlier test's) are not this run's to place
        self.procs: dict[str, set[frozenset[int]]] = {}
        self.threads: set[frozenset[int]] = set()
        self._t = threading.Thread(target=self._poll, daemon=True)
        self._t.start()

    def _poll(self) -> None:
        me = psutil.Process()
        while not self.stop.wait(0.02):
            for p in me.children(recursive=True):
                if p.pid in self.earlier:
                    continue
                try:
                    self.procs.setdefault(p.name(), set()).add(frozenset(p.cpu_affinity()))
                except psutil.Error:  # it ended between the listing and the look
                    continue
            side = self.trainer.rollouts
            for t in [side._loop._thread if side._loop else None, getattr(side._backend, "_reader", None)]:
                if t is not None and t.native_id is not None and t.is_alive():
                    self.threads.add(thread_cpus(t.native_id))

    def close(self) -> None:
        self.stop.set()
        self._t.join()


def _run(tiny_path: Path, out: Path, **cpus: Any) -> tuple[list[dict[str, float]], _Watch, list[frozenset[int]]]:
    cfg = make_config(
        out,
        max_steps=2,
        pairs_per_step=1,
        num_generations=2,
        learning_rate=1e-2,
        rollout_process=True,
        rollout_backend=f"hf:{tiny_path}?max_batch=1&seed=0",
        **cpus,
    )
    earlier = {p.pid for p in psutil.Process().children(recursive=True)}
    trainer = TreeGRPOTrainer(cfg, tiny_path)
    watch, main_cpus = _Watch(trainer, earlier), []
    try:
        history = trainer.train(on_step=lambda m: main_cpus.append(thread_cpus()))
    finally:
        watch.close()
        trainer.close()
    return history, watch, main_cpus


@pytest.mark.sandbox
def test_a_pinned_run_places_trainer_and_rollout_side_and_trains_as_the_unpinned_one(tiny_path: Path, tmp_path: Path) -> None:
    before = thread_cpus()
    pinned, watch, main_cpus = _run(
        tiny_path, tmp_path / "pinned", trainer_cpus=",".join(map(str, TRAIN)), rollout_cpus=",".join(map(str, ROLL))
    )
    assert main_cpus == [TRAIN, TRAIN] and thread_cpus() == before  # trained on its CPUs, given back after train()
    assert watch.threads == {ROLL}  # the event loop thread (executor, proxy) and the child's pipe reader
    assert "bwrap" in watch.procs, f"no sandbox seen while rollouts ran: {sorted(watch.procs)}"
    assert all(seen == {ROLL} for seen in watch.procs.values()), watch.procs  # policy child, sandboxes, harnesses
    free, _, _ = _run(tiny_path, tmp_path / "free")
    for key in ("reward", "loss", "grad_norm"):
        assert [m[key] for m in pinned] == pytest.approx([m[key] for m in free], abs=1e-6), key
