"""The Ray executor on a local in-process Ray cluster matches the local executor."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import ray

from clawgym_env.runner import RunConfig, load_attempts, run_benchmark

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def ray_cluster():  # type: ignore[no-untyped-def]
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}},
    )
    yield
    ray.shutdown()


def _form(out: Path) -> tuple[list[str], list[dict[str, object]], dict[str, int]]:
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() and not p.is_relative_to(out / "captures"))
    attempts = [a.model_dump(exclude={"session_id", "timings", "started_at", "finished_at"}) for a in load_attempts(out)]
    captures = {
        f"{a.task_id}|{a.harness}|{a.attempt}": len((out / "captures" / f"{a.session_id}.jsonl").read_text().splitlines())
        for a in load_attempts(out)
    }
    return files, attempts, captures


async def test_no_cluster_at_ray_address_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from clawgym_env.errors import RunError

    if ray.is_initialized():
        pytest.skip("a Ray cluster is already joined in this process")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray, "init", lambda **kw: (_ for _ in ()).throw(ConnectionError("Could not find any running Ray instance.")))
    config = RunConfig(
        model="scripted:fake",
        harnesses=["custom"],
        suite="fake:1",
        executor="ray",
        ray_address="auto",
        worker="runner_fakes:FakeEpisodeWorker",
        out=str(tmp_path / "r"),
    )
    with pytest.raises(RunError, match=r"--ray-address auto: no Ray cluster found .*`ray start --head`"):
        await run_benchmark(config, progress=False)


async def test_ray_run_matches_local(tmp_path: Path, ray_cluster: None) -> None:
    kw = dict(
        model="scripted:fake",
        harnesses=["custom", "other"],
        suite="fake:4",
        attempts=2,
        concurrency=3,
        worker="runner_fakes:FakeEpisodeWorker",
        save_workspaces=True,
    )
    local = await run_benchmark(RunConfig(out=str(tmp_path / "local"), **kw), progress=False)  # type: ignore[arg-type]
    remote = await run_benchmark(RunConfig(out=str(tmp_path / "ray"), executor="ray", **kw), progress=False)  # type: ignore[arg-type]
    assert _form(local.out_dir) == _form(remote.out_dir)
    assert remote.manifest.executor == "ray" and remote.manifest.harnesses == local.manifest.harnesses
    assert remote.metrics.overall.pass_at == local.metrics.overall.pass_at
    assert len(list((tmp_path / "ray" / "captures").glob("*.jsonl"))) == 16


@pytest.mark.sandbox
async def test_ray_real_episodes_match_local(tmp_path: Path, ray_cluster: None) -> None:
    """Real episodes (scripted policy, custom harness, bwrap) inside the Ray actor score as locally."""
    from runner_smoke import EXPECTED, POLICY, copy_smoke_suite

    suite = copy_smoke_suite(tmp_path)
    kw = dict(model=f"scripted:{POLICY}", harnesses=["custom"], suite=str(suite), attempts=1, concurrency=3)
    local = await run_benchmark(RunConfig(out=str(tmp_path / "local"), **kw), progress=False)  # type: ignore[arg-type]
    remote = await run_benchmark(RunConfig(out=str(tmp_path / "ray"), executor="ray", **kw), progress=False)  # type: ignore[arg-type]
    assert _form(local.out_dir) == _form(remote.out_dir)
    assert {a.task_id: a.score for a in remote.attempts} == {t: s for t, (s, _) in EXPECTED.items()}
    assert remote.manifest.suite_hash == local.manifest.suite_hash
