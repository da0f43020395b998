"""Prove tasks sound: the reference solution must score 1.0, a do-nothing agent its expected floor.

Each check runs in a fresh sandbox exactly as an episode would: workspace seeded from the task,
the solution (or nothing) run as the agent, then ``verify``. A do-nothing score above 0 fails
unless the task declares it (``metadata.expected_noop_score``), so partial credit for nothing
is visible, never hidden.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawgym_env.errors import ClawGymError
from clawgym_env.proxy.backends.base import PolicyBackend
from clawgym_env.sandbox.base import Mount, SandboxConfig
from clawgym_env.task.spec import RubricVerifier, TaskSpec
from clawgym_env.task.suite import Suite
from clawgym_env.task.verify import VerifyResult, make_transcript, params_env, verify

__all__ = ["SOLUTION_MOUNT", "CheckResult", "check_suite", "check_task", "record_noop_scores"]

SOLUTION_MOUNT = "/solution"
"""Where the reference solution folder is mounted (read-only) for ``solve.sh``; never during a real episode."""
_FULL = 1.0 - 1e-9


@dataclass
class CheckResult:
    """The outcome of checking one task."""

    task_id: str
    solution_status: str = "none"
    """"pass" (scored 1.0), "fail", "none" (no reference solution), "skipped" (rubric without a judge), "error"."""
    solution_score: float | None = None
    noop_status: str = "pass"
    """"pass" (scored the expected floor, 0.0 unless declared), "declared" (matches a declared non-zero floor), "fail", "error"."""
    noop_score: float | None = None
    expected_noop: float = 0.0
    problems: list[str] = field(default_factory=list)
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        """True unless the solution or the do-nothing check failed or errored."""
        return self.solution_status not in ("fail", "error") and self.noop_status not in ("fail", "error")


def _config(spec: TaskSpec, solution: Path | None = None) -> SandboxConfig:
    return SandboxConfig(
        workspace_mount=spec.workspace_mount,
        workspace_src=spec.workspace_dir,
        memory_mb=spec.limits.memory_mb,
        wall_time_s=spec.limits.wall_time_s,
        mounts=(Mount(host=solution, inside=SOLUTION_MOUNT),) if solution is not None else (),
    )


def _summary(res: VerifyResult) -> str:
    low = {k: v for k, v in res.subscores.items() if v < _FULL}
    parts = [f"{k}={v:.3g}" for k, v in list(low.items())[:6]]
    parts += [f"{n}: {e[:200]}" for n, e in res.errors.items()]
    return "; ".join(parts)


async def _run_solution(spec: TaskSpec, backend: str, judge: PolicyBackend | None) -> tuple[float, str]:
    from clawgym_env.sandbox import create_sandbox

    assert spec.solution_path is not None
    sol = spec.solution_path
    final = ""
    message_file = sol if sol.name == "final_message.txt" else sol.parent / "final_message.txt"
    if message_file.is_file():
        final = message_file.read_text(encoding="utf-8")
    async with create_sandbox(backend, _config(spec, sol.parent if sol.suffix == ".sh" else None)) as sb:
        if sol.suffix == ".sh":
            inside = f"{SOLUTION_MOUNT}/{sol.name}"
            res = await sb.exec(["bash", inside], cwd=spec.workspace_mount, timeout=spec.limits.wall_time_s,
                                env=params_env(spec))
            if res.timed_out or res.return_code != 0:
                why = "timed out" if res.timed_out else f"exited {res.return_code}"
                tail = (res.stderr or res.stdout).strip()[-500:]
                return 0.0, f"solution {sol.name} {why}: {tail}"
        messages = [{"role": "user", "content": spec.instruction}, {"role": "assistant", "content": final}]
        result = await verify(spec, sb, make_transcript(spec, final, messages), judge=judge)
    note = "" if result.score >= _FULL else f"solution scored {result.score:.3f}: {_summary(result)}"
    return result.score, note


async def _run_noop(spec: TaskSpec, backend: str, judge: PolicyBackend | None) -> VerifyResult:
    from clawgym_env.sandbox import create_sandbox

    async with create_sandbox(backend, _config(spec)) as sb:
        messages = [{"role": "user", "content": spec.instruction}, {"role": "assistant", "content": ""}]
        return await verify(spec, sb, make_transcript(spec, "", messages), judge=judge)


async def check_task(spec: TaskSpec, backend: str = "bwrap", judge: PolicyBackend | None = None) -> CheckResult:
    """Check one task: reference solution (if any) and the do-nothing agent, each in its own sandbox."""
    t0 = time.monotonic()
    out = CheckResult(task_id=spec.full_id, expected_noop=spec.expected_noop_score)
    needs_judge = any(isinstance(v, RubricVerifier) for v in spec.verifiers) and judge is None
    if spec.solution_path is not None and needs_judge:
        out.solution_status = "skipped"
        out.problems.append("solution not checked: the rubric verifier needs a judge (--judge)")
    elif spec.solution_path is not None:
        try:
            out.solution_score, note = await _run_solution(spec, backend, judge)
            out.solution_status = "pass" if out.solution_score >= _FULL else "fail"
            if note:
                out.problems.append(note)
        except ClawGymError as exc:
            out.solution_status = "error"
            out.problems.append(f"solution: {type(exc).__name__}: {exc}")
    try:
        noop = await _run_noop(spec, backend, judge)
        out.noop_score = noop.score
        got, want = round(noop.score, 3), round(out.expected_noop, 3)
        if got == want:
            out.noop_status = "declared" if want > 0 else "pass"
        else:
            out.noop_status = "fail"
            if want == 0:
                out.problems.append(
                    f"do-nothing agent scores {got}; if that partial credit is legitimate, declare "
                    f"`metadata: {{expected_noop_score: {got}}}` in task.yaml, else tighten the verifier"
                )
            else:
                out.problems.append(f"do-nothing agent scores {got}, but the task declares {want}")
            if noop.errors:
                out.problems.append("; ".join(f"{k}: {v[:200]}" for k, v in noop.errors.items()))
    except ClawGymError as exc:
        out.noop_status = "error"
        out.problems.append(f"do-nothing: {type(exc).__name__}: {exc}")
    out.duration_s = time.monotonic() - t0
    return out


async def check_suite(
    suite: Suite | Iterable[TaskSpec],
    backend: str = "bwrap",
    concurrency: int = 4,
    *,
    judge: PolicyBackend | None = None,
    on_result: Callable[[CheckResult], Any] | None = None,
) -> list[CheckResult]:
    """Check every task concurrently (at most ``concurrency`` at a time); results in task order."""
    tasks = list(suite.tasks if isinstance(suite, Suite) else suite)
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(spec: TaskSpec) -> CheckResult:
        async with gate:
            result = await check_task(spec, backend, judge)
        if on_result is not None:
            on_result(result)
        return result

    return list(await asyncio.gather(*(one(t) for t in tasks)))


def record_noop_scores(results: list[CheckResult], specs: Iterable[TaskSpec]) -> list[str]:
    """Declare measured non-zero do-nothing scores in each task.yaml (for imported suites).

    Only tasks that expected 0.0 and have no params variants are touched; their results are
    updated to "declared". The YAML is rewritten (comments are not kept). Returns one line per
    task written: "<full id>: <score> -> <file>".
    """
    from clawgym_env.task.importers._write import dump_yaml
    from clawgym_env.task.loader import TASK_FILE, read_yaml

    by_id = {s.full_id: s for s in specs}
    written = []
    for r in results:
        spec = by_id.get(r.task_id)
        if spec is None or spec.variant is not None or r.noop_status != "fail" or r.expected_noop != 0.0:
            continue
        if r.noop_score is None or r.noop_score <= 0:
            continue
        score = round(r.noop_score, 3)
        file = spec.task_dir / TASK_FILE
        data = read_yaml(file)
        data["metadata"] = {**(data.get("metadata") or {}), "expected_noop_score": score}
        file.write_text(dump_yaml(data), encoding="utf-8")
        r.expected_noop, r.noop_status = score, "declared"
        r.problems = [p for p in r.problems if not p.startswith("do-nothing agent scores")]
        written.append(f"{r.task_id}: {score} -> {file}")
    return written
