"""Strategies that claim without support: hedges over every candidate, and right-format values nothing backs."""

from __future__ import annotations

import math
import re
from pathlib import PurePosixPath

from clawgym_env.authoring.adversarial.base import Attempt, Strategy, TaskView
from clawgym_env.task.spec import AnswerVerifier

__all__ = ["Hedge", "UnsupportedClaims", "number_sweep"]

_NAME_RE = re.compile(r"\b[A-Z][a-z]+(?:[ -][A-Z][a-z]+)?\b")
_MAX_NAMES = 60


def number_sweep(top: float, count: int = 1200) -> list[str]:
    """Numbers from 0 to ``top`` so dense that any figure in that range is within 1 % (or 1) of one of them."""
    out = [str(i) for i in range(101)]
    if top > 100:
        ratio = max(1.02, (top / 100) ** (1 / max(1, count - 100)))
        v = 100.0
        while v < top * 1.05 and len(out) < count + 101:
            v *= ratio
            out.append(f"{v:.0f}" if v >= 1000 else f"{v:.1f}")
    return list(dict.fromkeys(out))


def _answer_sweep() -> list[str]:
    """Positive numbers from 0.01 to 1e10, each 3 % above the last: one lies within 2 % of any value there."""
    steps = int(math.log(1e12) / math.log(1.03)) + 1
    return [f"{0.01 * 1.03**i:.4g}" for i in range(steps)]


def _top(task: TaskView) -> float:
    values = [abs(float(n)) for n in task.numbers if len(n) < 16]
    return 2 * max(values, default=100.0)


def _headings(task: TaskView, path: str) -> list[str]:
    ref = task.reference_for(path)
    source = ref.no_rows if ref is not None and ref.no_rows else ""
    found = [ln for ln in source.splitlines() if ln.startswith("#")]
    return found or task.headings or ["## Summary"]


class Hedge(Strategy):
    name = "hedge"
    tries = (
        "Answers with every candidate at once: every number of the inputs, or a sweep over all magnitudes, "
        "in one tagged answer; every name of the inputs (in their order or reversed) as a line and a table, or a "
        "dense sweep of numbers, under each heading of each report and in the final message (pays where any "
        "one match, or the first one named, counts)."
    )

    def attempts(self, task: TaskView) -> list[Attempt]:
        out: list[Attempt] = []
        answers = [v for v in task.spec.verifiers if isinstance(v, AnswerVerifier)]
        for tag_name, values in (("answer-all-numbers", task.numbers[:400]), ("answer-sweep", _answer_sweep())):
            if not answers or not values:
                continue
            files: dict[str, str] = {}
            message = ""
            for v in answers:
                body = ", ".join(values)
                text = f"<{v.tag}>{body}</{v.tag}>" if v.tag else body
                if v.source.startswith("file:"):
                    files[v.source[5:]] = text + "\n"
                else:
                    message = f"The answer is one of these. {text}"
            out.append(Attempt(f"{self.name}:{tag_name}", files, message))
        words, ids = list(dict.fromkeys(_NAME_RE.findall(task.all_text)))[:_MAX_NAMES], task.ids[:_MAX_NAMES]
        names = words + ids
        reports = [p for p in task.outputs if PurePosixPath(p).suffix.lower() in (".md", ".markdown", ".txt")]
        for tag_name, values in (("names", names), ("names-reversed", words[::-1] + ids[::-1]), ("numbers", number_sweep(_top(task)))):
            if not values:
                continue
            files = {p: _report(task, p, values) for p in reports}
            if files or (tag_name == "numbers" and task.numbers):
                out.append(Attempt(f"{self.name}:{tag_name}", files, ", ".join(values)))
        return out


def _report(task: TaskView, path: str, values: list[str]) -> str:
    """Every value under every heading, as a line and as the first column of a table; one per line in plain text."""
    if not path.endswith((".md", ".markdown")):
        return "\n".join(values) + "\n"
    table = "| item | value | note |\n|---|---|---|\n" + "".join(f"| {v} | {v} | {v} |\n" for v in values[:_MAX_NAMES])
    return "".join(f"{h}\n\n{', '.join(values)}\n\n{table}\n" for h in _headings(task, path))


class UnsupportedClaims(Strategy):
    name = "unsupported-claims"
    tries = (
        "Writes every output in the reference solution's exact format with values the inputs do not support: "
        "times, dates and numbers shifted and names invented, or every value swapped for another of its kind "
        "from the inputs (pays where a grader checks an entry's format, not the entry)."
    )

    def attempts(self, task: TaskView) -> list[Attempt]:
        return self.variants(
            {
                "invented": {r.path: r.fake for r in task.reference if r.fake is not None},
                "from-inputs": {r.path: r.fake_from_inputs for r in task.reference if r.fake_from_inputs is not None},
            }
        )
