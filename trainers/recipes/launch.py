"""Launch a GPU recipe folder on one node: the vLLM server on its GPUs, then the FSDP2 trainer on the rest.

    python -m trainers.recipes.launch trainers/recipes/qwen3-8b-8gpu --model /models/Qwen3-8B
    python -m trainers.recipes.launch trainers/recipes/qwen3-8b-8gpu --dry-run

``--dry-run`` needs no GPU and no weights: it resolves the whole run (devices, shards, batch and
token budgets, memory per GPU from ``config.json``), prints it with the launch commands, then runs
the same recipe at a tiny scale on CPU: the tiny model, ``tiny.processes`` processes sharding it
(FSDP2 over gloo), bf16 autocast, the recipe's attention and harnesses, the ``--rollout_process``
child in the vLLM server's place with the recipe's weight sync (gloo broadcast), one step and a
sharded checkpoint. What differs on the GPUs is the CUDA kernels, NCCL and vLLM itself.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from clawgym_env.errors import ClawGymError, ConfigError
from trainers.recipes.plan import ROOT, Plan, accelerate_launch, format_plan, parse_recipe, resolve

__all__ = ["launch", "main", "tiny_run"]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tiny_args(plan: Plan, out: Path) -> list[str]:
    """The recipe's flags with the scale cut to a CPU: tiny model, CPU processes, the rollout child for vLLM."""
    t = plan.layout.tiny
    args = [
        "--config",
        str(plan.folder / "recipe.yaml"),
        "--model_name_or_path",
        "tiny",
        "--use_cpu",
        "true",
        "--rollout_process",
        "true",
        "--suite",
        t.suite,
        "--max_steps",
        str(t.max_steps),
        "--pairs_per_step",
        str(t.pairs_per_step),
        "--num_generations",
        str(t.num_generations),
        "--max_completion_length",
        str(t.max_completion_length),
        "--save_steps",
        "1",
        "--beta",
        str(t.beta),
        "--max_concurrent_episodes",
        "2",
        "--report_to",
        "none",
        "--output_dir",
        str(out),
    ]
    return [*args, "--tasks", t.tasks] if t.tasks else args


def tiny_run(plan: Plan, out: Path, *, timeout_s: float = 1800) -> dict[str, Any]:
    """Run the recipe at tiny scale on CPU (``tiny.processes`` gloo processes); return its step's metrics."""
    args = tiny_args(plan, out)
    parse_recipe(plan.folder, args[2:])  # a flag the tiny scale sets wrong fails here, not in every process
    procs = plan.layout.tiny.processes
    cmd = [*accelerate_launch(procs, "--main_process_ip", "127.0.0.1", "--main_process_port", str(_port())), *args]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    }
    print(f"tiny run on CPU: {procs} processes, output {out}", flush=True)
    done = subprocess.run(cmd, env=env, cwd=ROOT, timeout=timeout_s)
    if done.returncode != 0:
        raise ClawGymError(f"the tiny run of {plan.folder} failed (exit {done.returncode}); its output is above")
    state = json.loads((out / "final" / "trainer_state.json").read_text())
    (metrics,) = state["log_history"][-1:]
    return {
        "metrics": metrics,
        "processes": state["num_processes"],
        "shards": sorted(p.name for p in (out / f"checkpoint-{plan.layout.tiny.max_steps}" / "sharded").glob("*.distcp")),
    }


def launch(plan: Plan, model: str) -> int:
    """Start the vLLM server on its GPUs, wait for it, run the trainer on the others; stop the server at the end."""
    from clawgym_env.proxy.backends.vllm_server import launch_vllm_server

    lay = plan.layout
    vllm_env = {"CUDA_VISIBLE_DEVICES": ",".join(map(str, lay.vllm.gpus))}
    server = launch_vllm_server(model, lay.vllm.port, plan.vllm_args(), served_model_name=model, env=vllm_env)
    try:
        server.wait_ready(timeout=1800)
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(map(str, lay.trainer.gpus)), "PYTHONPATH": str(ROOT)}
        return subprocess.run(plan.trainer_command(model), env=env, cwd=ROOT).returncode
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("recipe", type=Path, help="a recipe folder: recipe.yaml, layout.yaml, config.json")
    ap.add_argument("--model", default=None, help="the model folder (weights) the GPUs load; not needed for --dry-run")
    ap.add_argument("--dry-run", action="store_true", help="resolve and print the run, then run it tiny on CPU")
    ap.add_argument("--out", type=Path, default=None, help="--dry-run: where the tiny run writes (default: a temp folder)")
    args = ap.parse_args(argv)
    try:
        plan = resolve(args.recipe, args.model)
        print(format_plan(plan, args.model or "MODEL"), flush=True)
        if not args.dry_run:
            if not args.model or not (Path(args.model) / "config.json").is_file():
                raise ConfigError(f"--model {args.model!r}: pass the folder of the model's weights (with config.json)")
            return launch(plan, args.model)
        out = args.out or Path(tempfile.mkdtemp(prefix="clawgym-recipe-"))
        result = tiny_run(plan, out)
        m = result["metrics"]
        print(
            "tiny run: "
            + "  ".join(
                f"{k}={m[k]:.4g}"
                for k in sorted(m)
                if k.startswith(("loss", "mismatch", "grad_norm", "trainable_tokens", "sync_s", "policy_version"))
            )
            + f"  sharded checkpoint: {result['shards']}",
            flush=True,
        )
    except ClawGymError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
