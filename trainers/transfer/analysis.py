"""The registered analysis: Pass@1 per arm, seed, decoding and harness on held-out task types and held-out
variants, and RL against the best control with intervals clustered by template.

Pass@1 of a configuration (an arm decoded one way) on a part of the test split is the mean score over its
seeds, variants and attempts; every template weighs the same (each has the same number of variants). The
*controls* are the SFT adapter at every registered temperature and greedy, and ``sft-more`` decoded both
ways; the best control is the one with the highest Pass@1 on that part and harness. The interval of
``RL - best control`` resamples templates with replacement (a template's variants, attempts and seeds
move together: near-identical variants of one template are not independent evidence) and takes the best
control again inside every resample, so the choice of the control is inside the interval; the p-value
flips the sign of each template's difference (the permutation test of no effect over templates).
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainers.transfer.design import Arm, Design
from trainers.transfer.evaluate import record_dir

__all__ = ["Cell", "analyze", "compare", "load_cells", "plot_curves"]

PARTS = ("types", "variants")
"""``types``: the test templates (never trained on); ``variants``: test-pool variants of the RL templates."""


@dataclass(frozen=True)
class Cell:
    """One configuration's scores: arm, decoding mode ("greedy" or "t<T>"), harness -> part -> template -> scores."""

    arm: str
    mode: str
    harness: str


def _mode(folder: str) -> str:
    return folder.split("-", 1)[1]


def load_cells(out: Path, design: Design) -> dict[Cell, dict[str, dict[str, dict[int, list[float]]]]]:
    """cell -> part -> template -> seed -> scores, from every test results folder of ``out/runs``."""
    from clawgym_env.runner import load_attempts

    part_of = {**{t: "types" for t in design.test_templates}, **{t: "variants" for t in design.rl_templates}}
    cells: dict[Cell, dict[str, dict[str, dict[int, list[float]]]]] = {}
    for arm in design.arms:
        for seed in arm.seeds:
            for folder in sorted(record_dir(out, arm.name, seed).glob("test-*")):
                for a in load_attempts(folder):
                    cell = Cell(arm.name, _mode(folder.name), a.harness)
                    tree = cells.setdefault(cell, {p: defaultdict(dict) for p in PARTS})
                    tree[part_of[a.category]][a.category].setdefault(seed, []).append(a.score)
    for arm in design.arms:
        if arm.kind == "sft":
            _share_greedy(cells, arm)
    return cells


def _share_greedy(cells: dict[Cell, Any], arm: Arm) -> None:
    """The SFT adapter decodes greedily the same for every seed: its one greedy run stands for all of them."""
    for cell, tree in cells.items():
        if cell.arm == arm.name and cell.mode == "greedy":
            for part in tree.values():
                for by_seed in part.values():
                    one = next(iter(by_seed.values()))
                    for s in arm.seeds:
                        by_seed.setdefault(s, one)


def _template_rates(tree: dict[str, dict[int, list[float]]], seeds: list[int] | None = None) -> dict[str, float]:
    """template -> Pass@1 (over the given seeds, or all)."""
    out = {}
    for t, by_seed in tree.items():
        scores = [x for s, v in by_seed.items() if seeds is None or s in seeds for x in v]
        if scores:
            out[t] = sum(scores) / len(scores)
    return out


def pass_at_1(tree: dict[str, dict[int, list[float]]], templates: list[str], seeds: list[int] | None = None) -> float:
    rates = _template_rates(tree, seeds)
    return sum(rates[t] for t in templates) / len(templates)


def compare(
    cells: dict[Cell, Any], treated: Cell, controls: list[Cell], part: str, *, resamples: int = 10_000, seed: int = 0
) -> dict[str, Any]:
    """``treated`` - best of ``controls`` on ``part``: point estimate, the best control, a template-bootstrap 95%
    interval (the best control chosen again in each resample) and the sign-flip permutation p-value (one-sided)."""
    templates = sorted(cells[treated][part])
    rate = {c: _template_rates(cells[c][part]) for c in [treated, *controls] if c in cells}
    controls = [c for c in controls if c in rate and all(t in rate[c] for t in templates)]

    def diff(sample: list[str]) -> tuple[float, Cell]:
        mean = {c: sum(rate[c][t] for t in sample) / len(sample) for c in [treated, *controls]}
        best = max(controls, key=lambda c: mean[c])
        return mean[treated] - mean[best], best

    point, best = diff(templates)
    rng = random.Random(seed)
    boots = sorted(diff([rng.choice(templates) for _ in templates])[0] for _ in range(resamples))
    lo, hi = boots[int(0.025 * resamples)], boots[int(0.975 * resamples) - 1]
    per = [rate[treated][t] - rate[best][t] for t in templates]
    flips = sum(sum(x * rng.choice((-1, 1)) for x in per) >= sum(per) - 1e-12 for _ in range(resamples))
    return {
        "treated": treated.__dict__,
        "best_control": best.__dict__,
        "diff": point,
        "ci95": [lo, hi],
        "p_one_sided": flips / resamples,
        "templates": len(templates),
        "treated_pass1": sum(rate[treated][t] for t in templates) / len(templates),
        "control_pass1": sum(rate[best][t] for t in templates) / len(templates),
    }


def _controls(design: Design, harness: str, cells: dict[Cell, Any]) -> list[Cell]:
    kinds = {a.name for a in design.arms if a.kind in ("sft", "sft-more")}
    return [c for c in cells if c.arm in kinds and c.harness == harness]


def analyze(out: Path, design: Design) -> dict[str, Any]:
    """Write ``results.json`` and ``results.md`` (and the curves) from ``out``'s results folders; returns the results."""
    cells = load_cells(out, design)
    harnesses = design.eval_harnesses.split(",")
    table = []
    for cell, tree in sorted(cells.items(), key=lambda kv: (kv[0].arm, kv[0].mode, kv[0].harness)):
        arm = design.arm(cell.arm)
        row: dict[str, Any] = {"arm": cell.arm, "mode": cell.mode, "harness": cell.harness}
        for part in PARTS:
            if tree[part]:
                ts = sorted(tree[part])
                row[part] = pass_at_1(tree[part], ts)
                row[f"{part}_seeds"] = [pass_at_1(tree[part], ts, [s]) for s in arm.seeds]
        table.append(row)
    comparisons = []
    rl_modes = [f"t{design.rl.temperature:g}", "greedy"]
    for arm in design.arms:
        if not arm.kind.startswith("rl"):
            continue
        for harness in harnesses:
            for mode in rl_modes:
                treated = Cell(arm.name, mode, harness)
                if treated not in cells:
                    continue
                for part in PARTS:
                    if cells[treated][part] and _controls(design, harness, cells):
                        comparisons.append(
                            {"vs": "best SFT control", "part": part, **compare(cells, treated, _controls(design, harness, cells), part)}
                        )
    results = {"pass_at_1": table, "comparisons": comparisons, "target_met": _target(design, comparisons)}
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / "results.md").write_text(_markdown(results))
    plot_curves(out, design)
    return results


def _target(design: Design, comparisons: list[dict[str, Any]]) -> bool:
    """The registered target: an RL arm (not the shuffled control), sampled at its temperature, at least 10 points over the
    best SFT control on held-out task types through some harness, the 95% interval above zero."""
    arms = {a.name for a in design.arms if a.kind == "rl"}
    mode = f"t{design.rl.temperature:g}"
    return any(
        c["treated"]["arm"] in arms and c["treated"]["mode"] == mode and c["part"] == "types" and c["diff"] >= 0.10 and c["ci95"][0] > 0
        for c in comparisons
    )


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _markdown(results: dict[str, Any]) -> str:
    lines = [
        "# Results (generated by trainers/transfer/analysis.py)",
        "",
        "Pass@1 (%) on the test split: held-out task types / held-out variants of the RL templates; mean over seeds, then each seed.",
        "",
        "| arm | decoding | harness | held-out types | seeds | held-out variants | seeds |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results["pass_at_1"]:
        cols = []
        for part in PARTS:
            if part in r:
                cols += [_pct(r[part]), " / ".join(_pct(x) for x in r[f"{part}_seeds"])]
            else:
                cols += ["", ""]
        lines.append(f"| {r['arm']} | {r['mode']} | {r['harness']} | " + " | ".join(cols) + " |")
    lines += [
        "",
        "Each RL arm against the best SFT control (SFT at every temperature and greedy, more SFT both ways), "
        "difference in points, 95% interval by template bootstrap (control re-chosen per resample), one-sided "
        "sign-flip p over templates.",
        "",
        "| arm | decoding | harness | part | RL | best control | control | difference | 95% interval | p |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in results["comparisons"]:
        b = c["best_control"]
        lines.append(
            f"| {c['treated']['arm']} | {c['treated']['mode']} | {c['treated']['harness']} | {c['part']} | "
            f"{_pct(c['treated_pass1'])} | {b['arm']} {b['mode']} | {_pct(c['control_pass1'])} | {100 * c['diff']:+.1f} | "
            f"[{100 * c['ci95'][0]:+.1f}, {100 * c['ci95'][1]:+.1f}] | {c['p_one_sided']:.3f} |"
        )
    lines += ["", f"Registered target met: **{'yes' if results['target_met'] else 'no'}**", ""]
    return "\n".join(lines)


def plot_curves(out: Path, design: Design) -> list[Path]:
    """One PNG per trained arm: reward and KL (RL) or loss (more SFT) per step, one line per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    (out / "curves").mkdir(exist_ok=True)
    for arm in design.arms:
        if arm.kind == "sft":
            continue
        keys = ["loss"] if arm.kind == "sft-more" else ["reward", "kl"]
        fig, axes = plt.subplots(1, len(keys), figsize=(5 * len(keys), 3.2), squeeze=False)
        drawn = False
        for seed in arm.seeds:
            hist = record_dir(out, arm.name, seed) / "history.json"
            if not hist.is_file():
                continue
            steps = json.loads(hist.read_text())
            for ax, key in zip(axes[0], keys, strict=True):
                ax.plot([int(s["step"]) for s in steps], [s.get(key, float("nan")) for s in steps], marker=".", label=f"seed {seed}")
                ax.set_xlabel("step")
                ax.set_title(f"{arm.name}: {key}")
            drawn = True
        if drawn:
            axes[0][0].legend()
            fig.tight_layout()
            path = out / "curves" / f"{arm.name}.png"
            fig.savefig(path, dpi=90)
            written.append(path)
        plt.close(fig)
    return written
