"""The trainers under ``accelerate launch``: 2 CPU processes (gloo) reproduce the 1-process step and resume,
replicated (DDP) and sharded (``--fsdp``: FSDP2's fully_shard).

Fixed SYNTHETIC batches (no sandboxes), the real tiny model, real optimizer steps. Two
processes on the 2-core box: small packs, ~1 minute each (slow tier).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).parent / "ddp_step.py"
ROOT = Path(__file__).resolve().parents[2]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch(out: Path, *args: str, processes: int = 2, mode: str = "--multi_gpu", ok: bool = True) -> Any:
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "OMP_NUM_THREADS": "1"}
    if processes == 1:
        cmd = [sys.executable, str(SCRIPT), str(out), *args]
    else:  # on a CPU-only machine --multi_gpu selects torchrun + gloo (accelerate's MULTI_CPU)
        cmd = [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            mode,
            "--num_processes",
            str(processes),
            "--num_machines",
            "1",
            "--mixed_precision",
            "no",
            "--dynamo_backend",
            "no",
            "--main_process_ip",
            "127.0.0.1",
            "--main_process_port",
            str(_port()),
            str(SCRIPT),
            str(out),
            *args,
        ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if not ok:
        return proc
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    result = torch.load(out / "result.pt", weights_only=False)
    assert result["processes"] == processes
    return result


def assert_same(a: dict[str, Any], b: dict[str, Any], atol: float = 1e-5) -> None:
    for ma, mb in zip(a["metrics"], b["metrics"], strict=True):
        assert mb["loss"] == pytest.approx(ma["loss"], abs=atol)
        assert mb["trainable_tokens"] == ma["trainable_tokens"] and mb["kl"] == pytest.approx(ma["kl"], abs=atol)
        assert mb["grad_norm"] == pytest.approx(ma["grad_norm"], rel=1e-4)
    for name, pa in a["params"].items():
        assert torch.allclose(pa, b["params"][name], atol=atol, rtol=0), name


def test_two_processes_take_the_same_step_as_one(tmp_path: Path) -> None:
    one = launch(tmp_path / "one", "step", processes=1)
    two = launch(tmp_path / "two", "step", processes=2)
    assert_same(one, two)
    moved = max(float((p - two["params"][n]).abs().max()) for n, p in launch_initial().items())
    assert moved > 1e-4  # the step changed the weights (so equality says something)


def launch_initial() -> dict[str, torch.Tensor]:
    from transformers import AutoModelForCausalLM

    from clawgym_env.models import tiny_model_path

    return dict(AutoModelForCausalLM.from_pretrained(tiny_model_path()).state_dict())


def test_resume_of_a_two_process_run_continues_it(tmp_path: Path) -> None:
    through = launch(tmp_path / "through", "two")
    ckpt = tmp_path / "through" / "run" / "checkpoint-1"
    assert (ckpt / "accelerate").is_dir() and not ckpt.with_name("checkpoint-1.tmp").exists()
    resumed = launch(tmp_path / "resumed", "resume", str(ckpt))
    assert resumed["version"] == through["version"] == 2
    assert_same({"metrics": through["metrics"][1:], "params": through["params"]}, resumed, atol=1e-6)


def test_detached_trunk_step_under_two_processes_equals_one(tmp_path: Path) -> None:
    """DetachedTrunkForward's branches go through the DDP wrapper: gradients are all-reduced, as in one process.

    (Through the unwrapped module, DDP's reducer never armed: each rank stepped on its own packs' gradients.)"""
    one = launch(tmp_path / "one", "trunk", processes=1)
    two = launch(tmp_path / "two", "trunk", processes=2)
    assert min(one["trunks"]) >= 256  # every pack's trunk ran without gradient (tree_logprobs' min_prefix)
    assert_same(one, two)


def test_accelerates_own_fsdp_is_refused_for_the_trainers_own(tmp_path: Path) -> None:
    """accelerate 1.16 sets up no FSDP without CUDA (its --use_fsdp leaves MULTI_CPU, whose prepare wraps DDP): refused,
    pointing at --fsdp, rather than run as something else."""
    proc = launch(tmp_path / "fsdp", "step", mode="--use_fsdp", ok=False)
    assert proc.returncode != 0 and "drop accelerate's --use_fsdp and set --fsdp" in proc.stderr
    assert not (tmp_path / "fsdp" / "result.pt").exists()


def test_fsdp2_step_over_two_cpu_processes_equals_one_process(tmp_path: Path) -> None:
    """--fsdp: the policy sharded over 2 gloo processes (fully_shard per decoder layer) takes the 1-process step."""
    one = launch(tmp_path / "one", "step", processes=1)
    two = launch(tmp_path / "two", "step", "--fsdp", processes=2)
    assert two["sharded"] and not one["sharded"]
    assert_same(one, two)
    moved = max(float((p - two["params"][n]).abs().max()) for n, p in launch_initial().items())
    assert moved > 1e-4


def test_fsdp2_checkpoint_is_sharded_and_resumes_the_run(tmp_path: Path) -> None:
    through = launch(tmp_path / "through", "two", "--fsdp")
    ckpt = tmp_path / "through" / "run" / "checkpoint-1"
    shards = sorted(p.name for p in (ckpt / "sharded").glob("*.distcp"))
    assert len(shards) == 2 and (ckpt / "sharded" / ".metadata").is_file()  # each rank wrote its own shard
    assert (ckpt / "model" / "config.json").is_file()
    resumed = launch(tmp_path / "resumed", "resume", str(ckpt), "--fsdp")
    assert resumed["version"] == through["version"] == 2
    assert_same({"metrics": through["metrics"][1:], "params": through["params"]}, resumed, atol=1e-6)


def test_fsdp2_lora_trains_only_the_adapter_as_one_process_does(tmp_path: Path) -> None:
    one = launch(tmp_path / "one", "step", "--lora", processes=1)
    two = launch(tmp_path / "two", "step", "--lora", "--fsdp", processes=2)
    assert two["trainable"] and all(".lora_" in n for n in two["trainable"])
    assert_same(one, two)  # the merged weights the rollouts get
    initial = launch_initial()
    changed = {n for n, p in initial.items() if not torch.equal(p, two["params"][n])}
    assert changed and all(n.endswith("proj.weight") for n in changed)  # adapted linears only; embeddings, norms untouched
