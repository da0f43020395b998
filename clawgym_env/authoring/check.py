"""Prove tasks sound: the reference solution must score 1.0, a do-nothing agent its expected floor.

Each check runs in a fresh sandbox exactly as an episode would: workspace seeded from the task,
the solution (or nothing) run as the agent, then ``verify``. A do-nothing score above 0 fails
unless the task declares it (``metadata.expected_noop_score``), so partial credit for nothing
is visible, never hidden. With strategies (``--adversarial``), every gaming attempt they propose
is played the same way (its files written by the agent inside the sandbox) and the best score
any reaches must stay within ``metadata.max_exploit_score``. The attempts aim where the grader
looks: the files and folders the reference solution creates or changes (listed in its sandbox
right after it ran), besides the paths the instruction names.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawgym_env.authoring.adversarial import Attempt, Strategy, TaskView
from clawgym_env.authoring.adversarial.reference import (
    ReferenceOutput,
    reference_outputs,
    snapshot,
)
from clawgym_env.errors import ClawGymError, ConfigError
from clawgym_env.grading.verify import VerifyResult, make_transcript, params_env, verify
from clawgym_env.proxy.backends.base import PolicyBackend
from clawgym_env.sandbox.base import Mount, Sandbox, SandboxConfig
from clawgym_env.task.spec import RubricVerifier, TaskSpec
from clawgym_env.task.suite import Suite

__all__ = ["SOLUTION_MOUNT", "CheckResult", "check_suite", "check_task", "record_noop_scores"]

SOLUTION_MOUNT = "/solution"
"""Where the reference solution folder is mounted (read-only) for ``solve.sh``; never during a real episode."""
_FULL = 1.0 - 1e-9
_WRITER = (
    "import json, os, sys\n"
    "def writable(p):\n"
    "    if os.path.exists(p) and not os.access(p, os.W_OK):\n"
    "        os.chmod(p, os.stat(p).st_mode | 0o200)\n"
    "for rel, text in json.load(sys.stdin).items():\n"
    "    try:\n"
    "        parent = os.path.dirname(rel) or '.'\n"
    "        base = parent\n"
    "        while not os.path.exists(base):\n"
    "            base = os.path.dirname(base) or '.'\n"
    "        writable(base)\n"
    "        os.makedirs(parent, exist_ok=True)\n"
    "        writable(parent)\n"
    "        writable(rel)\n"
    "        with open(rel, 'w', encoding='utf-8') as fh:\n"
    "            fh.write(text)\n"
    "        if rel.endswith(('.sh', '.py')):\n"
    "            os.chmod(rel, 0o755)\n"
    "    except OSError as exc:\n"
    "        print(f'{rel}: not written: {exc}', file=sys.stderr)\n"
)
"""Run as the agent inside the sandbox: writes an attempt's files over the workspace, as a tool call would
(making read-only files and folders of the agent's writable first, as an agent can; a path that cannot be a
file, such as an existing folder, is left out)."""


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
    exploit_status: str = "not run"
    """"not run" (no strategies), "pass" (every attempt within max_exploit_score), "open" (the task declares 1.0:
    no protection claimed), "fail" (an attempt scored above it, or max_exploit_score reaches the pass threshold), "error"."""
    exploit_score: float | None = None
    """The best score any gaming attempt (the do-nothing agent included) reached."""
    exploit_by: str = ""
    """The attempt that reached it."""
    max_exploit: float = 0.0
    attempts: dict[str, float] = field(default_factory=dict)
    """Attempt label -> score (the do-nothing agent as "do-nothing")."""
    problems: list[str] = field(default_factory=list)
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        """True unless the solution, the do-nothing or the adversarial check failed or errored."""
        return all(s not in ("fail", "error") for s in (self.solution_status, self.noop_status, self.exploit_status))


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


@contextlib.asynccontextmanager
async def _slot(gate: asyncio.Semaphore | None) -> AsyncIterator[None]:
    if gate is None:
        yield
    else:
        async with gate:
            yield


Act = Callable[[Sandbox], Awaitable[str]]
"""What the agent does in the sandbox before grading; returns "" or why it failed (then nothing is graded)."""


async def _episode(
    spec: TaskSpec,
    backend: str,
    judge: PolicyBackend | None,
    final: str,
    act: Act | None,
    gate: asyncio.Semaphore | None,
    solution: Path | None = None,
    *,
    graded: bool = True,
) -> VerifyResult | str:
    """One graded episode: fresh sandbox, the agent's act, then the one ``verify`` path real episodes use
    (``graded=False``: the act alone; returns "" when it succeeded)."""
    from clawgym_env.sandbox import create_sandbox

    async with _slot(gate), create_sandbox(backend, _config(spec, solution)) as sb:
        failure = await act(sb) if act is not None else ""
        if failure or not graded:
            return failure
        messages = [{"role": "user", "content": spec.instruction}, {"role": "assistant", "content": final}]
        return await verify(spec, sb, make_transcript(spec, final, messages), judge=judge)


def _solve(spec: TaskSpec, found: list[ReferenceOutput] | None = None) -> Act:
    """Run the reference solution as the agent; with ``found``, record there what it created or changed."""
    assert spec.solution_path is not None
    sol = spec.solution_path

    async def act(sb: Sandbox) -> str:
        if sol.suffix != ".sh":
            return ""
        res = await sb.exec(
            ["bash", f"{SOLUTION_MOUNT}/{sol.name}"], cwd=spec.workspace_mount, timeout=spec.limits.wall_time_s, env=params_env(spec)
        )
        if res.timed_out or res.return_code != 0:
            why = "timed out" if res.timed_out else f"exited {res.return_code}"
            tail = (res.stderr or res.stdout).strip()[-500:]
            return f"solution {sol.name} {why}: {tail}"
        if found is not None:
            found.extend(reference_outputs(spec, await snapshot(sb, spec)))
        return ""

    return act


def _write(spec: TaskSpec, attempt: Attempt) -> Act:
    bad = [p for p in attempt.files if p.startswith("/") or ".." in p.split("/") or not p.strip()]
    if bad:
        raise ConfigError(f"attempt {attempt.label!r} writes outside the workspace: {bad[:3]}. Fix: give workspace-relative paths.")

    async def act(sb: Sandbox) -> str:
        if not attempt.files:
            return ""
        res = await sb.exec(["python3", "-c", _WRITER], cwd=spec.workspace_mount, timeout=60, stdin=json.dumps(attempt.files).encode())
        return "" if res.return_code == 0 else f"writing the attempt's files failed: {res.stderr.strip()[-300:]}"

    return act


async def _run_solution(
    spec: TaskSpec,
    backend: str,
    judge: PolicyBackend | None,
    gate: asyncio.Semaphore | None = None,
    found: list[ReferenceOutput] | None = None,
    *,
    graded: bool = True,
) -> tuple[float, str]:
    """Score the reference solution (``graded=False``: only run it, to fill ``found``)."""
    assert spec.solution_path is not None
    sol = spec.solution_path
    message_file = sol if sol.name == "final_message.txt" else sol.parent / "final_message.txt"
    final = message_file.read_text(encoding="utf-8") if message_file.is_file() else ""
    result = await _episode(
        spec, backend, judge, final, _solve(spec, found), gate, sol.parent if sol.suffix == ".sh" else None, graded=graded
    )
    if not graded:
        return 0.0, str(result)
    if isinstance(result, str):
        return 0.0, result
    note = "" if result.score >= _FULL else f"solution scored {result.score:.3f}: {_summary(result)}"
    return result.score, note


async def _run_noop(spec: TaskSpec, backend: str, judge: PolicyBackend | None, gate: asyncio.Semaphore | None = None) -> VerifyResult:
    result = await _episode(spec, backend, judge, "", None, gate)
    assert not isinstance(result, str)
    return result


async def _run_attempt(
    spec: TaskSpec, backend: str, judge: PolicyBackend | None, attempt: Attempt, gate: asyncio.Semaphore | None
) -> VerifyResult | str:
    return await _episode(spec, backend, judge, attempt.final_message, _write(spec, attempt), gate)


def _attempts(
    spec: TaskSpec, strategies: Iterable[Strategy], judge: PolicyBackend | None, reference: tuple[ReferenceOutput, ...] = ()
) -> list[Attempt]:
    view = TaskView(spec, reference)
    exempt = spec.exploit_exempt
    out: dict[str, Attempt] = {}
    for strategy in strategies:
        if strategy.name in exempt or (strategy.name == "judge-bait" and judge is None):
            continue  # exempt: its attempts solve this task; no judge: every rubric item scores 0, nothing to bait
        for a in strategy.attempts(view):
            if a.label not in exempt:
                out.setdefault(a.label, a)
    return list(out.values())


async def _check_exploits(
    out: CheckResult,
    spec: TaskSpec,
    backend: str,
    judge: PolicyBackend | None,
    strategies: list[Strategy],
    gate: asyncio.Semaphore | None,
    pass_threshold: float | None,
    reference: tuple[ReferenceOutput, ...] = (),
) -> None:
    out.max_exploit = spec.max_exploit_score
    attempts = _attempts(spec, strategies, judge, reference)
    results = await asyncio.gather(*(_run_attempt(spec, backend, judge, a, gate) for a in attempts), return_exceptions=True)
    details: dict[str, VerifyResult] = {}
    for a, r in zip(attempts, results, strict=True):
        if isinstance(r, BaseException):
            if not isinstance(r, ClawGymError):
                raise r
            out.exploit_status = "error"
            out.problems.append(f"attempt {a.label}: {type(r).__name__}: {r}")
        elif isinstance(r, str):
            out.problems.append(f"attempt {a.label} could not be played: {r}")
        else:
            out.attempts[a.label] = round(r.score, 3)
            details[a.label] = r
    if not out.attempts:
        out.exploit_status = out.exploit_status if out.exploit_status == "error" else "pass"
        return
    out.exploit_by, out.exploit_score = max(out.attempts.items(), key=lambda kv: kv[1])
    if out.exploit_status == "error":
        return
    if out.exploit_score > round(out.max_exploit, 3):
        out.exploit_status = "fail"
        hit = details.get(out.exploit_by)
        why = f" ({_summary(hit)})" if hit is not None and _summary(hit) else ""
        out.problems.append(
            f"gaming attempt {out.exploit_by} scores {out.exploit_score}, above max_exploit_score "
            f"{out.max_exploit:g}: tighten the grader{why}; full credit went to: "
            + ", ".join(k for k, v in (hit.subscores.items() if hit else ()) if v >= _FULL)
        )
    elif out.max_exploit >= 1.0:
        out.exploit_status = "open"
    elif pass_threshold is not None and out.max_exploit >= pass_threshold:
        out.exploit_status = "fail"
        out.problems.append(
            f"max_exploit_score {out.max_exploit:g} reaches the suite's pass_threshold "
            f"{pass_threshold:g}: a gaming attempt could pass; raise the threshold above it"
        )
    else:
        out.exploit_status = "pass"


async def check_task(
    spec: TaskSpec,
    backend: str = "bwrap",
    judge: PolicyBackend | None = None,
    *,
    strategies: list[Strategy] | None = None,
    pass_threshold: float | None = None,
    gate: asyncio.Semaphore | None = None,
) -> CheckResult:
    """Check one task: reference solution (if any), the do-nothing agent and (with ``strategies``) every
    gaming attempt, each in its own sandbox; ``gate`` bounds how many sandboxes run at once."""
    t0 = time.monotonic()
    out = CheckResult(task_id=spec.full_id, expected_noop=spec.expected_noop_score)
    needs_judge = any(isinstance(v, RubricVerifier) for v in spec.verifiers) and judge is None
    found: list[ReferenceOutput] | None = [] if strategies is not None else None
    if spec.solution_path is not None and needs_judge:
        out.solution_status = "skipped"
        out.problems.append("solution not checked: the rubric verifier needs a judge (--judge)")
        if found is not None:  # still run it: its outputs are where the gaming attempts aim
            with contextlib.suppress(ClawGymError):
                await _run_solution(spec, backend, judge, gate, found, graded=False)
    elif spec.solution_path is not None:
        try:
            out.solution_score, note = await _run_solution(spec, backend, judge, gate, found)
            out.solution_status = "pass" if out.solution_score >= _FULL else "fail"
            if note:
                out.problems.append(note)
        except ClawGymError as exc:
            out.solution_status = "error"
            out.problems.append(f"solution: {type(exc).__name__}: {exc}")
    try:
        noop = await _run_noop(spec, backend, judge, gate)
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
    if strategies is not None:
        if out.noop_score is not None:
            out.attempts["do-nothing"] = round(out.noop_score, 3)
        await _check_exploits(out, spec, backend, judge, strategies, gate, pass_threshold, tuple(found or ()))
    out.duration_s = time.monotonic() - t0
    return out


async def check_suite(
    suite: Suite | Iterable[TaskSpec],
    backend: str = "bwrap",
    concurrency: int = 4,
    *,
    judge: PolicyBackend | None = None,
    strategies: list[Strategy] | None = None,
    pass_threshold: float | None = None,
    on_result: Callable[[CheckResult], Any] | None = None,
) -> list[CheckResult]:
    """Check every task, at most ``concurrency`` sandboxes at a time; results in task order.

    ``strategies`` turns on the adversarial check; ``pass_threshold`` (a ``Suite`` brings its own)
    is what every ``max_exploit_score`` must stay below.
    """
    if isinstance(suite, Suite):
        tasks = list(suite.tasks)
        pass_threshold = suite.pass_threshold if pass_threshold is None else pass_threshold
    else:
        tasks = list(suite)
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(spec: TaskSpec) -> CheckResult:
        result = await check_task(spec, backend, judge, strategies=strategies, pass_threshold=pass_threshold, gate=gate)
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
    from clawgym_env.authoring.importers._write import dump_yaml
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
