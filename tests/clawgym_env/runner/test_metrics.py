"""Metrics: Pass@k by hand, the pass rule, error accounting, grouping."""

from __future__ import annotations

from math import comb

import pytest

from clawgym_env.metrics import compute_metrics, is_pass, pass_at_k
from clawgym_env.results import AttemptResult


def att(task: str, score: float, *, status: str | None = None, harness: str = "custom", k: int = 0, category: str = "c") -> AttemptResult:
    st = status or ("passed" if score >= 1.0 else "failed")
    return AttemptResult(
        task_id=task,
        harness=harness,
        attempt=k,
        category=category,
        status=st,
        score=score,
        model_calls=2,
        prompt_tokens=10,
        completion_tokens=3,
        timings={"total": 1.5},
    )


def test_pass_at_k_by_hand() -> None:
    # n=5, c=2, k=2: 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    # n=4, c=1, k=1 is c/n
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    # n=3, c=2, k=2: n-c < k -> certain
    assert pass_at_k(3, 2, 2) == 1.0
    assert pass_at_k(10, 0, 5) == 0.0
    for n in range(1, 12):
        for c in range(n + 1):
            for k in range(1, n + 1):
                want = 1.0 - comb(n - c, k) / comb(n, k)
                assert pass_at_k(n, c, k) == pytest.approx(want, abs=1e-12)


def test_pass_at_k_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="k <= n"):
        pass_at_k(2, 1, 3)
    with pytest.raises(ValueError, match="c <= n"):
        pass_at_k(2, 3, 1)


def test_pass_rule_uses_score_and_threshold_not_status() -> None:
    a = att("s/a", 0.8, status="passed")  # a lying status
    assert not is_pass(a, 1.0)
    assert is_pass(a, 0.75)
    assert not is_pass(att("s/a", 1.0, status="error"), 0.5)
    assert is_pass(att("s/a", 1.0, status="timeout"), 1.0)  # solved before the clock ran out


def test_compute_metrics_pass_at_k_averaged_per_task_and_errors_apart() -> None:
    attempts = [
        # task a: 1 of 4 pass
        att("s/a", 1.0, k=0),
        att("s/a", 0.0, k=1),
        att("s/a", 0.5, k=2),
        att("s/a", 0.0, k=3, status="error"),
        # task b: 3 of 4 pass, one timeout that failed
        att("s/b", 1.0, k=0, category="d"),
        att("s/b", 1.0, k=1, category="d"),
        att("s/b", 1.0, k=2, category="d"),
        att("s/b", 0.2, k=3, status="timeout", category="d"),
    ]
    m = compute_metrics(attempts, pass_threshold=1.0)
    o = m.overall
    assert m.ks == [1, 2, 4]
    assert o.attempts == 8 and o.pairs == 2
    assert o.passed == 4 and o.failed == 2 and o.errors == 1 and o.timeouts == 1
    assert o.mean_score == pytest.approx((1 + 0 + 0.5 + 0 + 1 + 1 + 1 + 0.2) / 8)
    assert o.pass_at[1] == pytest.approx((0.25 + 0.75) / 2)
    want2 = ((1 - comb(3, 2) / comb(4, 2)) + (1 - comb(1, 2) / comb(4, 2))) / 2
    assert o.pass_at[2] == pytest.approx(want2)
    assert o.pass_at[4] == pytest.approx(1.0)
    assert m.per_category["c"].pass_at[1] == pytest.approx(0.25)
    assert m.per_category["d"].pass_at[1] == pytest.approx(0.75)
    assert m.per_task["s/a|custom"].errors == 1
    assert o.prompt_tokens == 80 and o.model_calls == 16 and o.total_time_s == pytest.approx(12.0)


def test_per_harness_and_missing_k() -> None:
    attempts = [att("s/a", 1.0, harness="custom", k=0), att("s/a", 0.0, harness="custom", k=1), att("s/a", 0.0, harness="openclaw", k=0)]
    m = compute_metrics(attempts, pass_threshold=1.0, ks=[1, 2])
    assert m.per_harness["custom"].pass_at == {1: 0.5, 2: 1.0}
    assert m.per_harness["openclaw"].pass_at == {1: 0.0}  # n=1 < 2: Pass@2 undefined, not invented
    assert 2 not in m.overall.pass_at
    d = m.to_dict()
    assert d["per_harness"]["custom"]["pass_at"] == {"1": 0.5, "2": 1.0}  # type: ignore[index]


def test_empty() -> None:
    m = compute_metrics([], pass_threshold=1.0)
    assert m.overall.attempts == 0 and m.overall.mean_score == 0.0 and m.overall.pass_rate == 0.0
