"""Benchmark metrics, recomputed from attempt records alone.

The runner, ``clawgym bench report`` and the leaderboard all call :func:`compute_metrics`, so a
number printed after a run is the number a submission is ranked by.

Rules (printed with every table):

* An attempt *passes* iff it was not an ``error`` and its score is at or above the suite's
  ``pass_threshold`` (``suite.yaml``). The stored status is not trusted: the score decides.
* Errors (harness crash, sandbox failure: status ``error``), ``timeout`` and ``truncated`` are
  counted in their own columns, apart from ordinary fails. They stay in every denominator with
  the score the verifier gave the workspace they left (0 where none ran; an error never passes), so a harness
  that crashes cannot look better for it.
* Pass@k is the unbiased estimator of Chen et al. (2021), ``1 - C(n-c, k) / C(n, k)``, computed
  per (task, harness) pair from its ``n`` attempts with ``c`` passes, then averaged over pairs.
  It is only defined for ``k <= n``; pairs with fewer attempts make that k absent.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from clawgym_env.results import AttemptResult

__all__ = ["GroupMetrics", "Metrics", "compute_metrics", "is_pass", "pass_at_k"]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased Pass@k for one task: probability that k of n attempts (c passing) include a pass.

    Uses the product form ``1 - prod_{i=n-c+1..n} (1 - k/i)`` to avoid huge binomials.
    """
    if not 0 <= c <= n:
        raise ValueError(f"pass_at_k: need 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"pass_at_k: need 1 <= k <= n, got n={n}, k={k}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def is_pass(attempt: AttemptResult, pass_threshold: float) -> bool:
    """The suite's pass rule applied to one attempt (errors never pass)."""
    return attempt.status != "error" and attempt.score >= pass_threshold


@dataclass
class GroupMetrics:
    """Metrics over a set of attempts (the whole run, one harness, one category, one task)."""

    attempts: int = 0
    pairs: int = 0
    """(task, harness) pairs in the group."""
    mean_score: float = 0.0
    pass_at: dict[int, float] = field(default_factory=dict)
    """k -> mean unbiased Pass@k over the group's (task, harness) pairs."""
    passed: int = 0
    failed: int = 0
    errors: int = 0
    timeouts: int = 0
    truncated: int = 0
    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_time_s: float = 0.0

    @property
    def pass_rate(self) -> float:
        """Share of attempts that passed (equals the mean Pass@1 when every pair has the same n)."""
        return self.passed / self.attempts if self.attempts else 0.0


@dataclass
class Metrics:
    """Everything a report prints: overall, per harness, per category, per task (``task|harness``)."""

    pass_threshold: float
    ks: list[int]
    overall: GroupMetrics
    per_harness: dict[str, GroupMetrics]
    per_category: dict[str, GroupMetrics]
    per_task: dict[str, GroupMetrics]
    """Keyed ``"<task_id>|<harness>"``."""

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-able form (for the HTML report and the leaderboard)."""

        def g(m: GroupMetrics) -> dict[str, object]:
            d = dict(m.__dict__)
            d["pass_at"] = {str(k): v for k, v in m.pass_at.items()}
            d["pass_rate"] = m.pass_rate
            return d

        return {
            "pass_threshold": self.pass_threshold,
            "ks": self.ks,
            "overall": g(self.overall),
            "per_harness": {k: g(v) for k, v in self.per_harness.items()},
            "per_category": {k: g(v) for k, v in self.per_category.items()},
            "per_task": {k: g(v) for k, v in self.per_task.items()},
        }


def _default_ks(counts: Iterable[int]) -> list[int]:
    counts = list(counts)
    n_max = max(counts, default=1)
    return sorted({k for k in (1, 2, 4, 5, 8, 10, 16, 32, 64, 100) if k <= n_max} | {1, n_max})


def _group(attempts: Sequence[AttemptResult], pass_threshold: float, ks: Sequence[int]) -> GroupMetrics:
    m = GroupMetrics(attempts=len(attempts))
    pairs: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for a in attempts:
        ok = is_pass(a, pass_threshold)
        pairs[(a.task_id, a.harness)].append(ok)
        if a.status == "error":
            m.errors += 1
        elif a.status == "timeout":
            m.timeouts += 1
        elif a.status == "truncated":
            m.truncated += 1
        if ok:
            m.passed += 1
        elif a.status in ("passed", "failed"):
            m.failed += 1
        m.model_calls += a.model_calls
        m.prompt_tokens += a.prompt_tokens
        m.completion_tokens += a.completion_tokens
        m.total_time_s += a.timings.get("total", 0.0)
    m.pairs = len(pairs)
    m.mean_score = sum(a.score for a in attempts) / len(attempts) if attempts else 0.0
    for k in ks:
        vals = [pass_at_k(len(oks), sum(oks), k) for oks in pairs.values() if len(oks) >= k]
        if vals and len(vals) == len(pairs):
            m.pass_at[k] = sum(vals) / len(vals)
    return m


def compute_metrics(
    attempts: Sequence[AttemptResult],
    pass_threshold: float = 1.0,
    ks: Sequence[int] | None = None,
) -> Metrics:
    """Metrics of a run from its attempt records and the suite's pass threshold.

    ``ks`` defaults to 1 and the usual powers up to the largest attempt count. A Pass@k is
    reported for a group only when every (task, harness) pair in it has at least k attempts.
    """
    per_pair_n: dict[tuple[str, str], int] = defaultdict(int)
    for a in attempts:
        per_pair_n[(a.task_id, a.harness)] += 1
    ks_list = sorted(set(ks)) if ks else _default_ks(per_pair_n.values())
    by_harness: dict[str, list[AttemptResult]] = defaultdict(list)
    by_category: dict[str, list[AttemptResult]] = defaultdict(list)
    by_task: dict[str, list[AttemptResult]] = defaultdict(list)
    for a in attempts:
        by_harness[a.harness].append(a)
        by_category[a.category or "uncategorised"].append(a)
        by_task[f"{a.task_id}|{a.harness}"].append(a)
    return Metrics(
        pass_threshold=pass_threshold,
        ks=ks_list,
        overall=_group(attempts, pass_threshold, ks_list),
        per_harness={k: _group(v, pass_threshold, ks_list) for k, v in sorted(by_harness.items())},
        per_category={k: _group(v, pass_threshold, ks_list) for k, v in sorted(by_category.items())},
        per_task={k: _group(v, pass_threshold, ks_list) for k, v in sorted(by_task.items())},
    )
