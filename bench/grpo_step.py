"""Where a tree-GRPO step's time goes, before and after, side by side in one run (prints, never asserts).

A step of the transfer experiment's size: 4 groups x 8 rollouts of SmolLM2-135M with the SFT adapter through
the real ``claude-code-bash`` harness (bwrap sandboxes, hidden graders) on the RL templates of
``procgen-compose-train``, then one policy update with a KL term and the weight sync. Two arms, each in its
own process, one after the other (``--rounds 2``: before, after, before, after):

- ``before``: the code at ``--before`` (default: the revision before the shared-trunk backend and LoRA
  training), extracted with ``git archive`` into a temporary folder, run as the Pass@1 experiment's RL stage ran:
  the SFT adapter merged into a full model, the top 10 layers trained in full (``freeze_bottom`` 20), the
  backend decoding up to 8 calls at a time, each with its own copy of the shared system prompt's keys/values.
- ``after``: this checkout with the registered `rl` arm's settings (``trainers.transfer.arms.rl_config``: learning
  rate, KL coefficient, groups with equal rewards left out of the step): the SFT adapter trained as LoRA
  (``trainers.transfer.arms.RLTrainer``: policy and reference share the frozen bottom's outputs), the backend
  decoding all 32 episodes' calls together against one copy of the shared prompt (``_hf_shared``).

Per step: wall seconds; the rollout (its wall, and inside it the policy's prefill and decode seconds, which
run serially on the backend's worker thread, and the per-episode means of sandbox start, harness run
beside the model, grading and cleanup, which overlap across the 32 episodes); the update (train) and the weight
sync; the CPU seconds of the arm's process (model, trainer, proxy) and of the rest of the machine (the harnesses,
sandboxes and graders it starts), which show whether the step is bound by the two cores. Timers wrap
``HFBackend.prefill`` and ``Batcher._step`` in the child (both revisions have them).
The first step includes the cold prefill of the shared prompt in both arms; ``--steps 3`` shows later ones.

    python bench/grpo_step.py --adapter experiments/rl-transfer/adapters/sft
    python bench/grpo_step.py --adapter ... --rounds 2 --steps 3
    python bench/grpo_step.py --adapter ... --arms after        # this checkout only
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "86d884e"
RL_TEMPLATES = "code-to-folder,count-to-name,find-copy,find-delete,find-rename,follow-chain,pointer-copy,pointer-rename"


def child(a: argparse.Namespace) -> dict[str, Any]:
    """One arm in this process (``sys.path`` already points at its code): ``a.steps`` GRPO steps, timed by stage."""
    import clawgym_env.proxy.backends._hf_batch as batch_mod
    from clawgym_env.proxy.backends.hf import HFBackend
    from clawgym_env.task import load_suite
    from trainers.core import rollout_side
    from trainers.tree_grpo.config import TreeGRPOConfig
    from trainers.tree_grpo.trainer import TreeGRPOTrainer
    from trainers.tree_sft.forward import DetachedTrunkForward

    spent = {"prefill_s": 0.0, "decode_s": 0.0}

    def timed(fn: Any, key: str) -> Any:
        def wrapper(*args: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kw)
            finally:
                spent[key] += time.perf_counter() - t0

        return wrapper

    HFBackend.prefill = timed(HFBackend.prefill, "prefill_s")  # type: ignore[method-assign]
    batch_mod.Batcher._step = timed(batch_mod.Batcher._step, "decode_s")  # type: ignore[method-assign]
    episodes: list[dict[str, float]] = []
    build = rollout_side.build_batch

    def keep(groups: Any, **kw: Any) -> Any:
        for _, _, eps in groups:
            episodes.extend(dict(e.timings) for e in eps)
        return build(groups, **kw)

    rollout_side.build_batch = keep  # type: ignore[assignment]

    class Before(DetachedTrunkForward, TreeGRPOTrainer):
        pass

    folder = str(ROOT / "tasks" / "procgen-compose-train")
    tasks = load_suite(folder).select([f"{t}-*" for t in RL_TEMPLATES.split(",")])
    lora = a.child == "after"
    if lora:  # the registered RL arm's settings, as the experiment's train stage builds them
        from trainers.transfer.arms import RLTrainer, rl_config  # RLTrainer: the shared frozen bottom (trainers/transfer/forward.py)
        from trainers.transfer.design import Design

        design = Design.full()
        cfg = rl_config(Path(a.work), design, design.arm("rl"), 0, suite=folder, max_steps=a.steps, save_steps=0)
        trainer: TreeGRPOTrainer = RLTrainer(cfg, a.model, tasks=tasks)
    else:
        cfg = TreeGRPOConfig(
            output_dir=a.work,
            suite=folder,
            harness="claude-code-bash",
            num_generations=8,
            pairs_per_step=4,
            task_sampling="stratified",
            max_steps=a.steps,
            learning_rate=1e-4,
            lr_scheduler_type="constant",
            max_completion_length=64,
            temperature=1.0,
            beta=0.02,
            max_concurrent_episodes=28,
            seed=0,
            use_cpu=True,
            save_steps=0,
        )
        trainer = Before(cfg, a.model, tasks=tasks)
        from trainers.tree_sft.frozen import freeze_bottom

        freeze_bottom(trainer.policy, 20)
    steps: list[dict[str, float]] = []
    cpu = [_cpu()]

    def on_step(m: dict[str, float]) -> None:
        row = {k: float(m.get(k, 0.0)) for k in ("rollout_s", "train_s", "sync_s", "reward", "generated_tokens", "kl", "groups_trained")}
        row.update(spent)
        cpu.append(_cpu())
        row["cpu_self"], machine = (cpu[-1][i] - cpu[-2][i] for i in (0, 1))
        row["cpu_rest"] = machine - row["cpu_self"]
        n = max(1, len(episodes))
        for k in ("sandbox", "harness", "model", "verifier", "cleanup", "total"):
            row[f"ep_{k}"] = sum(e.get(k, 0.0) for e in episodes) / n
        row["episodes"] = float(len(episodes))
        steps.append(row)
        spent.update(prefill_s=0.0, decode_s=0.0)
        episodes.clear()
        print("STEP " + json.dumps(row), flush=True)

    try:
        trainer.train(on_step=on_step)
    finally:
        trainer.close()
    return {"arm": a.child, "steps": steps}


def _cpu() -> tuple[float, float]:
    """CPU seconds (user + system) of this process (model, trainer, proxy) and of the whole machine: the rest is the
    harnesses, sandboxes and graders (and anything else running), whichever of the overlapping stages spent them."""
    import resource

    me = resource.getrusage(resource.RUSAGE_SELF)
    fields = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    busy = sum(fields) - fields[3] - fields[4]  # all but idle and iowait
    return me.ru_utime + me.ru_stime, busy / os.sysconf("SC_CLK_TCK")


ROWS = [
    ("wall", "step wall s"),
    ("rollout_s", "  rollout (32 episodes) s"),
    ("prefill_s", "    policy prefill s (serial)"),
    ("decode_s", "    policy decode s (serial)"),
    ("ep_sandbox", "    episode: sandbox start s (mean)"),
    ("ep_harness_own", "    episode: harness beside the model s (mean)"),
    ("ep_model", "    episode: waiting on the model s (mean)"),
    ("ep_verifier", "    episode: grading s (mean)"),
    ("ep_cleanup", "    episode: cleanup s (mean)"),
    ("train_s", "  update (train, incl. sync) s"),
    ("sync_s", "    weight sync s"),
    ("cpu_self", "CPU s: model, trainer, proxy (one process)"),
    ("cpu_rest", "CPU s: the rest (harnesses, sandboxes, ...)"),
    ("groups_trained", "groups trained"),
    ("reward", "reward (mean)"),
    ("generated_tokens", "tokens generated"),
]


def _tree(rev: str, into: Path) -> Path:
    """The code at ``rev`` (``git archive`` of the packages), without touching the checkout."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "clawgym_env", "trainers", "harnesses"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def _merged(adapter: Path, into: Path) -> Path:
    """The SFT adapter merged into SmolLM2, saved as a full model folder (what the earlier code trains)."""
    from transformers import AutoTokenizer

    from clawgym_env.models.adapter import adapter_base, load_merged

    load_merged(adapter_base(adapter), adapter).save_pretrained(into)
    AutoTokenizer.from_pretrained(adapter_base(adapter)).save_pretrained(into)
    return into


def _run_arm(arm: str, tree: Path, model: Path, steps: int, work: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    cmd = [sys.executable, __file__, "--child", arm, "--model", str(model), "--steps", str(steps), "--work", str(work)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tree, check=False)
    rows = [json.loads(line[5:]) for line in proc.stdout.splitlines() if line.startswith("STEP ")]
    if proc.returncode != 0 or len(rows) < steps:
        raise RuntimeError(f"{arm} arm failed ({proc.returncode}): {proc.stderr[-2000:]}")
    for r in rows:
        r["wall"] = r["rollout_s"] + r["train_s"]
        r["ep_harness_own"] = r["ep_harness"] - r["ep_model"]
    return {"arm": arm, "steps": rows, "process_s": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--adapter", type=Path, default=ROOT / "experiments" / "rl-transfer" / "adapters" / "sft")
    ap.add_argument("--arms", default="before,after", help="which arms to run, in this order each round (default %(default)s)")
    ap.add_argument("--before", default=BEFORE, help="revision of the 'before' arm (default %(default)s)")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--child", choices=["before", "after"], help=argparse.SUPPRESS)
    ap.add_argument("--model", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        child(a)
        return
    with tempfile.TemporaryDirectory(prefix="grpo-step-") as d:
        tmp = Path(d)
        (tmp / "before").mkdir()
        trees = {"before": _tree(a.before, tmp / "before"), "after": ROOT}
        models = {"before": _merged(a.adapter, tmp / "merged"), "after": a.adapter.resolve()}
        print(f"load before: {os.getloadavg()}", flush=True)
        results = []
        chosen = a.arms.split(",")
        for r in range(a.rounds):
            for arm in chosen:
                results.append((r, _run_arm(arm, trees[arm], models[arm], a.steps, tmp / f"work-{arm}-{r}")))
                print(f"round {r + 1} {arm}: done in {results[-1][1]['process_s']:.0f}s, load {os.getloadavg()}", flush=True)
    for r in range(a.rounds):
        arms = {res["arm"]: res["steps"] for rr, res in results if rr == r}
        print(f"\nround {r + 1}: GRPO step of 4 groups x 8 rollouts, SmolLM2-135M + SFT adapter, claude-code-bash")
        head = "".join(f"{arm} step {i + 1}".rjust(16) for arm in chosen for i in range(a.steps))
        print(f"{'':44}{head}")
        for key, label in ROWS:
            cells = "".join(f"{arms[arm][i].get(key, 0.0):16.1f}" for arm in chosen for i in range(a.steps))
            print(f"{label:44}{cells}")
    print(f"\nload after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
