"""Does RL through a harness teach what SFT did not? The transfer experiment (``trainers/transfer``), stage by stage.

    python trainers/scripts/experiment_transfer.py --out experiments/rl-transfer --stages register
    git add experiments/rl-transfer/{design.json,PREREGISTRATION.md} && git commit   # before any test evaluation
    python trainers/scripts/experiment_transfer.py --out experiments/rl-transfer --stages capture,sft,train --arms rl --seeds 0
    python trainers/scripts/experiment_transfer.py --out experiments/rl-transfer            # every stage, arm and seed
    python trainers/scripts/experiment_transfer.py --quick --out /tmp/transfer-quick        # CI size, end to end

Every stage reuses what an earlier run left (the design is frozen in ``OUT/design.json`` once written), so an
interrupted command is rerun as it was. ``--work`` (default ``OUT/work``, not committed) holds the expert
dataset, checkpoints and training state.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from clawgym_env.errors import ConfigError
from trainers.transfer.design import Design
from trainers.transfer.stages import STAGES

__all__ = ["main", "parse_args", "run"]


def run(
    out: Path, work: Path, design: Design, stages: list[str], arms: list[str] | None = None, seeds: list[int] | None = None
) -> dict[str, Any]:
    """Run ``stages`` (in ``STAGES`` order) for the chosen arms and seeds; returns per-stage seconds (and the analysis)."""
    from trainers.transfer import stages as st
    from trainers.transfer.analysis import analyze
    from trainers.transfer.prereg import preregistration

    unknown = sorted(set(stages) - set(STAGES))
    if unknown:
        raise ConfigError(f"--stages {unknown}: use some of {list(STAGES)}")
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    chosen = [design.arm(a) for a in arms] if arms else design.arms
    times: dict[str, Any] = {}

    def timed(name: str, fn: Any, *args: Any) -> Any:
        t0 = time.perf_counter()
        value = fn(*args)
        times[name] = round(time.perf_counter() - t0, 1)
        print(f"== {name}: {times[name]:.0f}s", flush=True)
        return value

    if "register" in stages:
        if not (out / "design.json").is_file():
            design.save(out / "design.json")
        (out / "PREREGISTRATION.md").write_text(preregistration(Design.load(out / "design.json")))
    saved = Design.load(out / "design.json")
    if saved.to_json() != design.to_json():
        print(f"note: {out / 'design.json'} (the registered design) is used, not the code's current one", flush=True)
    design = saved
    design.check()
    needs_sft = bool({"sft", "train"} & set(stages))
    # the expert data: to train the SFT adapter (none when the design starts from a published one), and for sft-more
    needs_data = (("capture" in stages or needs_sft) and not design.sft.adapter) or (
        "train" in stages and any(a.kind == "sft-more" for a in chosen)
    )
    dataset = timed("capture", st.capture, work, design) if needs_data else None
    sft_adapter = timed("sft", st.sft, work, out, design, dataset) if needs_sft else out / "adapters" / "sft"
    for arm in chosen:
        for seed in seeds if seeds is not None else arm.seeds:
            if seed not in arm.seeds:
                continue
            if "train" in stages and arm.kind != "sft":
                timed(f"train {arm.name} seed {seed}", st.train, work, out, design, arm, seed, sft_adapter, dataset)
            if "test" in stages:
                timed(f"test {arm.name} seed {seed}", st.test, out, design, arm, seed)
    if "analyze" in stages:
        times["analysis"] = analyze(out, design)
    return times


def parse_args(argv: list[str] | None = None) -> tuple[Path, Path, Design, list[str], list[str] | None, list[int] | None]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="Experiment folder (committed results land here)")
    parser.add_argument("--work", type=Path, default=None, help="Datasets, checkpoints, logs (default OUT/work)")
    parser.add_argument("--quick", action="store_true", help="The CI-size design (custom harness, few steps and variants)")
    parser.add_argument("--stages", default=",".join(STAGES), help=f"Comma-separated, of {','.join(STAGES)} (default all)")
    parser.add_argument("--arms", default=None, help="Comma-separated arm names (default all)")
    parser.add_argument("--seeds", default=None, help="Comma-separated seeds (default each arm's)")
    a = parser.parse_args(argv)
    design = Design.quick() if a.quick else Design.full()
    arms = a.arms.split(",") if a.arms else None
    seeds = [int(s) for s in a.seeds.split(",")] if a.seeds else None
    return a.out, a.work or a.out / "work", design, a.stages.split(","), arms, seeds


def main(argv: list[str] | None = None) -> dict[str, Any]:
    return run(*parse_args(argv))


if __name__ == "__main__":
    main()
