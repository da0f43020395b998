"""Score a finished episode: every verifier runs, weighted, in a sealed grading sandbox.

``verify`` (and ``clawgym_env.grading.grade.grade_workspace``, which it calls) grades the final
workspace in a fresh sandbox, never the agent's: see ``grade`` for what that guarantees. Code and
script verifiers run there through small drivers whose verdict is signed with a per-run key the
agent's code cannot learn; rubric items go to an LLM judge; answers are compared in-process. A
verifier that crashes, is killed, exits non-zero, prints garbage, returns NaN or times out scores
0 with the reason kept in ``details``; only a sandbox that cannot run anything at all raises
``VerifierError``.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import math
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawgym_env.errors import SandboxError, VerifierError
from clawgym_env.grading.answer import extract_tagged, match_answer
from clawgym_env.grading.judge import ask_judge, build_judge_messages
from clawgym_env.grading.officeqa_scoring import final_answer, officeqa_verdict
from clawgym_env.proxy.backends.base import PolicyBackend
from clawgym_env.sandbox._sweep import tagged_tempdir
from clawgym_env.sandbox.base import Sandbox, Spawned
from clawgym_env.task.spec import (
    AnswerVerifier,
    CodeVerifier,
    RubricVerifier,
    ScriptVerifier,
    TaskSpec,
)

__all__ = ["PAYLOAD_PATH", "VerifyResult", "make_transcript", "params_env", "reward_payload", "run_verifiers", "spawn_graders", "verify"]

PAYLOAD_PATH = "/tmp/.clawgym-verify/reward_payload.json"
"""Where script verifiers find the episode (ClawGym's OPENCLAW_REWARD_PAYLOAD convention)."""
_MARK = "__CLAWGYM_GRADE__ "
_CODE_DRIVER = (Path(__file__).with_name("_grade_driver.py")).read_text(encoding="utf-8")
_SCRIPT_DRIVER = (Path(__file__).with_name("_script_driver.py")).read_text(encoding="utf-8")
_JAIL = (Path(__file__).with_name("_agent_jail.py")).read_text(encoding="utf-8")
_OUTPUT_CAP = 20_000
_SAFE_ENV = {"PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONSAFEPATH": "1"}
"""Keeps files the agent left in HOME or the workspace (a json.py next to the cwd of ``python3 -c``)
from loading into verifiers and the processes they start."""


@dataclass
class VerifyResult:
    """The reward of one episode and how it was reached."""

    score: float
    """Weighted mean of the verifiers' scores, in [0, 1]."""
    subscores: dict[str, float] = field(default_factory=dict)
    """"<verifier name>/<sub-score>" -> value (code: grade()'s keys; script: "score"; rubric: items; answer: "match")."""
    details: dict[str, Any] = field(default_factory=dict)
    """{"verifiers": {name: {"kind", "weight", "score", "error"?, ...}}}; rubric entries keep the judge's reasoning."""
    output: str = ""
    """Verifier processes' stdout/stderr (truncated), for debugging a task."""

    @property
    def errors(self) -> dict[str, str]:
        """Verifier name -> why it scored 0 (empty when every verifier ran cleanly)."""
        return {n: d["error"] for n, d in self.details.get("verifiers", {}).items() if d.get("error")}


def make_transcript(spec: TaskSpec, final_message: str = "", messages: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The ``transcript`` dict verifiers receive (``params``: the variant's params entry, {} if none)."""
    return {
        "task_id": spec.full_id,
        "instruction": spec.instruction,
        "final_message": final_message,
        "messages": list(messages or []),
        "params": dict(spec.params),
    }


def params_env(spec: TaskSpec) -> dict[str, str]:
    """The variant's params for shell code: CLAWGYM_PARAMS (JSON) and CLAWGYM_PARAM_<NAME> per scalar."""
    env = {"CLAWGYM_TASK_ID": spec.full_id, "CLAWGYM_PARAMS": json.dumps(spec.params, default=str)}
    for key, value in spec.params.items():
        if isinstance(value, (str, int, float, bool)):
            env[f"CLAWGYM_PARAM_{key.upper()}"] = str(value)
    return env


def _clamp(value: float) -> float:
    return 0.0 if not math.isfinite(value) else min(1.0, max(0.0, value))


def _tail(text: str) -> str:
    return text if len(text) <= _OUTPUT_CAP else "...\n" + text[-_OUTPUT_CAP:]


@dataclass
class _Outcome:
    score: float
    subscores: dict[str, float]
    info: dict[str, Any]
    output: str = ""


async def _exec(
    sandbox: Sandbox, cmd: list[str], spec: TaskSpec, timeout: float, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> Any:
    try:
        return await sandbox.exec(cmd, cwd=spec.workspace_mount, timeout=timeout, stdin=stdin, env=env)
    except SandboxError as exc:
        raise VerifierError(f"verifier for {spec.full_id} could not run in the sandbox: {exc}") from exc


def _grader_command(v: CodeVerifier | ScriptVerifier, spec: TaskSpec) -> tuple[list[str], dict[str, str]]:
    """The grading process of a code or script verifier (argv, env): the same whatever the episode did,
    so it can be started before the episode ends (``spawn_graders``); its request comes on stdin."""
    if isinstance(v, CodeVerifier):
        # -I: the agent's files (a json.py in the workspace, a usercustomize in HOME) must not load into the grader
        return ["python3", "-I", "-c", _CODE_DRIVER, _JAIL], dict(_SAFE_ENV)
    env = {
        **_SAFE_ENV,
        **params_env(spec),
        "CLAWGYM_WORKSPACE": spec.workspace_mount,
        "CLAWGYM_HIDDEN": spec.hidden_mount,
        "CLAWGYM_TASK_ID": spec.full_id,
        "OPENCLAW_REWARD_PAYLOAD": PAYLOAD_PATH,
    }
    return ["python3", "-I", "-c", _SCRIPT_DRIVER, _JAIL], env


async def _spawn(v: CodeVerifier | ScriptVerifier, spec: TaskSpec, sandbox: Sandbox) -> Spawned:
    argv, env = _grader_command(v, spec)
    try:
        return await sandbox.spawn(argv, env=env, cwd=spec.workspace_mount)
    except SandboxError as exc:
        raise VerifierError(f"verifier for {spec.full_id} could not run in the sandbox: {exc}") from exc


async def spawn_graders(spec: TaskSpec, sandbox: Sandbox) -> list[Spawned | None]:
    """The grading processes of ``spec``'s code and script verifiers, started now in ``sandbox`` and blocked on
    their stdin (None for the other kinds), for ``run_verifiers(..., spawned=...)``. The drivers read nothing
    of the workspace before their request arrives, so they may start while the agent is still running."""
    out: list[Spawned | None] = []
    try:
        for v in spec.verifiers:
            out.append(await _spawn(v, spec, sandbox) if isinstance(v, (CodeVerifier, ScriptVerifier)) else None)
    except BaseException:
        for s in out:
            if s is not None:
                await s.discard()
        raise
    return out


async def _grade_in(
    proc: Spawned | None, v: CodeVerifier | ScriptVerifier, spec: TaskSpec, sandbox: Sandbox, stdin: bytes, timeout: float
) -> Any:
    """Run the grading process: the one spawned ahead if it is still waiting, else a fresh one."""
    if proc is None or not proc.alive:
        if proc is not None:
            await proc.discard()
        proc = await _spawn(v, spec, sandbox)
    try:
        return await proc.finish(stdin, timeout)
    except SandboxError as exc:
        raise VerifierError(f"verifier for {spec.full_id} could not run in the sandbox: {exc}") from exc


def _signed_verdict(res: Any, key: bytes, what: str, timeout_s: float) -> tuple[dict[str, Any] | None, str | None]:
    """The driver's signed verdict, or why there is none: a grader killed, timed out or exiting
    non-zero is an error, and an unsigned marker line (anyone may print one) is ignored."""
    if res.timed_out:
        return None, f"{what} ran past {timeout_s:g}s"
    if res.return_code != 0:
        return None, f"grading process exited {res.return_code} (killed or failed): no verdict"
    for line in reversed(res.stdout.splitlines()):
        if not line.startswith(_MARK):
            continue
        mac, _, body = line[len(_MARK) :].partition(" ")
        if hmac.compare_digest(mac, hmac.new(key, body.encode(), hashlib.sha256).hexdigest()):
            try:
                return json.loads(body), None
            except ValueError:
                break
    return None, "grading process exited without a signed verdict"


def _driver_output(res: Any) -> str:
    lines = [ln for ln in res.stdout.splitlines() if not ln.startswith(_MARK)]
    text = "\n".join(lines).strip("\n")
    return text + (("\n[stderr]\n" + res.stderr) if res.stderr.strip() else "")


async def _run_code(v: CodeVerifier, spec: TaskSpec, sandbox: Sandbox, transcript: dict[str, Any], proc: Spawned | None) -> _Outcome:
    inside = spec.sandbox_path_of(v.file)
    key = secrets.token_bytes(32)
    request = {
        "key": key.hex(),
        "transcript": transcript,
        "workspace": spec.workspace_mount,
        "file": inside,
        "source": None if inside else spec.host_path(v.file).read_text(encoding="utf-8"),
    }
    res = await _grade_in(proc, v, spec, sandbox, json.dumps(request, default=str).encode(), v.timeout_s)
    output = _driver_output(res)
    payload, error = _signed_verdict(res, key, "grade()", v.timeout_s)
    if payload is None:
        return _Outcome(0.0, {}, {"error": error}, output)
    if not payload.get("ok"):
        return _Outcome(0.0, {}, {"error": str(payload.get("error", "grade() failed"))}, output)
    raw: dict[str, float] = payload.get("scores") or {}
    if not raw:
        return _Outcome(0.0, {}, {"error": "grade() returned no sub-scores"}, output)
    subs = {k: _clamp(float(x)) for k, x in raw.items()}
    bad = sorted(k for k, x in raw.items() if not math.isfinite(float(x)))
    if bad:
        return _Outcome(0.0, subs, {"error": f"sub-scores not finite: {', '.join(bad)}"}, output)
    return _Outcome(sum(subs.values()) / len(subs), subs, {}, output)


def reward_payload(spec: TaskSpec, transcript: dict[str, Any]) -> dict[str, Any]:
    """What script verifiers find at ``PAYLOAD_PATH`` (ClawGym's OPENCLAW_REWARD_PAYLOAD)."""
    return {
        "task_id": spec.full_id,
        "user_query": spec.instruction,
        "metadata": spec.metadata,
        "final_message": transcript.get("final_message", ""),
        "transcript": transcript.get("messages", []),
    }


async def _run_script(v: ScriptVerifier, spec: TaskSpec, sandbox: Sandbox, proc: Spawned | None) -> _Outcome:
    inside = spec.sandbox_path_of(v.file)
    if inside:
        argv = ["bash", inside]
    else:
        argv = ["bash", "-c", spec.host_path(v.file).read_text(encoding="utf-8"), v.file]
    key = secrets.token_bytes(32)
    request = {
        "key": key.hex(),
        "argv": argv,
        "cwd": spec.workspace_mount,
        "timeout": v.timeout_s,
        "jail_python": spec.metadata.get("source_format") == "clawgym",
    }
    res = await _grade_in(proc, v, spec, sandbox, json.dumps(request).encode(), v.timeout_s + 15)
    output = _driver_output(res)
    payload, error = _signed_verdict(res, key, "script", v.timeout_s + 15)
    if payload is not None and payload.get("rc") is None:
        error = f"script ran past {v.timeout_s:g}s"
    elif payload is not None and payload.get("stray"):
        error = "script exited leaving processes running (killed; a process outliving its grader could forge it)"
    elif payload is not None and payload.get("rc") != 0:
        error = f"script exited {payload.get('rc')}"
    if error is not None or payload is None:
        return _Outcome(0.0, {"score": 0.0}, {"error": error}, output)
    lines = [ln.strip() for ln in str(payload.get("stdout", "")).splitlines() if ln.strip()]
    try:
        value = float(lines[-1]) if lines else math.nan
    except ValueError:
        return _Outcome(0.0, {"score": 0.0}, {"error": f"last line {lines[-1][:80]!r} is not a number"}, output)
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        return _Outcome(0.0, {"score": 0.0}, {"error": f"script printed {value!r}, not a number in [0, 1]"}, output)
    return _Outcome(value, {"score": value}, {}, output)


async def _read_inside(sandbox: Sandbox, path: str, limit: int) -> str | None:
    """A workspace file's text (cut to ``limit`` chars), or None if it is missing."""
    with tagged_tempdir("read") as tmp:
        dest = Path(tmp) / "file"
        try:
            await sandbox.download(path, dest)
        except (SandboxError, OSError, FileNotFoundError):
            return None
        if not dest.is_file():
            return None
        text = dest.read_bytes()[: limit * 4].decode("utf-8", errors="replace")
    return text if len(text) <= limit else text[:limit] + "\n...(cut)"


_GLOB = (
    "import glob,os,sys\nos.chdir(sys.argv[1])\n"
    "hits=[p for p in sorted(glob.glob(sys.argv[2], recursive=True)) if os.path.isfile(p)]\n"
    "print('\\n'.join(hits[:int(sys.argv[3])]))"
)


async def _expand(sandbox: Sandbox, spec: TaskSpec, patterns: list[str], cap: int = 20) -> list[str]:
    """Workspace files named by ``patterns``; entries with * ? [ are globbed inside the sandbox."""
    names: list[str] = []
    for pat in patterns:
        if not any(ch in pat for ch in "*?["):
            names.append(pat)
            continue
        res = await _exec(sandbox, ["python3", "-I", "-c", _GLOB, spec.workspace_mount, pat, str(cap)], spec, 30)
        names.extend(ln for ln in res.stdout.splitlines() if ln.strip() and ln not in names)
    return names[:cap]


async def _run_rubric(
    v: RubricVerifier, spec: TaskSpec, sandbox: Sandbox, transcript: dict[str, Any], judge: PolicyBackend | None
) -> _Outcome:
    if v.grading == "jobbench":  # the output files alone, extracted in the sandbox, binary rubrics
        from clawgym_env.grading.jobbench_grading import grade_jobbench

        return _Outcome(*await grade_jobbench(v, spec, sandbox, judge))
    final = str(transcript.get("final_message") or "")
    files = {f: await _read_inside(sandbox, f, v.max_file_chars) for f in await _expand(sandbox, spec, v.files)}
    names = [item.name or f"item{i + 1}" for i, item in enumerate(v.items)]
    if not final.strip() and all(t is None or not t.strip() for t in files.values()):
        verdicts = {n: {"score": 0.0, "verdict": None, "reasoning": "nothing to judge: no final message, no files"} for n in names}
        return _Outcome(0.0, dict.fromkeys(names, 0.0), {"items": verdicts})
    if judge is None:
        return _Outcome(0.0, dict.fromkeys(names, 0.0), {"error": "no judge backend configured for this rubric (pass a judge)"})
    calls = [
        ask_judge(
            judge,
            build_judge_messages(item, spec.instruction, final, files),
            item,
            session_id=f"judge:{spec.full_id}:{v.name}",
            call_index=i,
        )
        for i, item in enumerate(v.items)
    ]
    results = await asyncio.gather(*calls)
    subs = {n: r.score for n, r in zip(names, results, strict=True)}
    total_w = sum(item.weight for item in v.items)
    score = sum(item.weight * r.score for item, r in zip(v.items, results, strict=True)) / total_w if total_w > 0 else 0.0
    items = {
        n: {"score": r.score, "verdict": r.verdict, "reasoning": r.reasoning, **({"error": r.error} if r.error else {})}
        for n, r in zip(names, results, strict=True)
    }
    errors = [f"{n}: {r.error}" for n, r in zip(names, results, strict=True) if r.error]
    info: dict[str, Any] = {"items": items}
    if errors:
        info["error"] = "; ".join(errors)
    return _Outcome(score, subs, info)


def _officeqa_outcome(v: AnswerVerifier, text: str) -> _Outcome:
    """OfficeQA's official rule: the last tagged answer (else the whole text), a direct answer, matched."""
    verdicts = [officeqa_verdict(e, text, v.tolerance, v.tag) for e in v.expected]
    ok = any(passed for passed, _ in verdicts)
    info: dict[str, Any] = {"extracted": final_answer(text, v.tag)[:1000], "expected": v.expected, "rule": "officeqa"}
    if not ok:
        info["why"] = verdicts[0][1]
    return _Outcome(1.0 if ok else 0.0, {"match": 1.0 if ok else 0.0}, info)


async def _run_answer(v: AnswerVerifier, spec: TaskSpec, sandbox: Sandbox, transcript: dict[str, Any]) -> _Outcome:
    if v.source == "final_message":
        text: str | None = str(transcript.get("final_message") or "")
    else:
        text = await _read_inside(sandbox, v.source[len("file:") :], 100_000)
    if text is None:
        return _Outcome(0.0, {"match": 0.0}, {"error": f"{v.source} does not exist", "extracted": None})
    if v.rule == "officeqa":
        return _officeqa_outcome(v, text)
    found = extract_tagged(text, v.tag)
    if found is None and v.source != "final_message":
        found = text.strip()  # an answer file may hold the bare answer
    ok = any(match_answer(found, e, v.tolerance) for e in v.expected)
    info: dict[str, Any] = {"extracted": found, "expected": v.expected}
    if found is None:
        info["error"] = f"no <{v.tag}>...</{v.tag}> in the {v.source.replace('_', ' ')}"
    return _Outcome(1.0 if ok else 0.0, {"match": 1.0 if ok else 0.0}, info)


async def run_verifiers(
    spec: TaskSpec,
    sandbox: Sandbox,
    transcript: dict[str, Any],
    judge: PolicyBackend | None = None,
    spawned: list[Spawned | None] | None = None,
) -> VerifyResult:
    """Run every verifier in ``sandbox`` (a grading sandbox with the hidden files and payload in
    place) and combine their scores by weight. ``grade_workspace`` is the way in. ``spawned``: the
    grading processes ``spawn_graders`` started ahead, one per verifier (each is used or discarded)."""
    total_w = sum(v.weight for v in spec.verifiers)
    subscores: dict[str, float] = {}
    infos: dict[str, Any] = {}
    outputs: list[str] = []
    score = 0.0
    ahead = list(spawned) if spawned is not None else [None] * len(spec.verifiers)
    for i, v in enumerate(spec.verifiers):
        proc, ahead[i] = ahead[i], None
        if isinstance(v, CodeVerifier):
            out = await _run_code(v, spec, sandbox, transcript, proc)
        elif isinstance(v, ScriptVerifier):
            out = await _run_script(v, spec, sandbox, proc)
        elif isinstance(v, RubricVerifier):
            out = await _run_rubric(v, spec, sandbox, transcript, judge)
        else:
            out = await _run_answer(v, spec, sandbox, transcript)
        value = _clamp(out.score)
        score += value * v.weight / total_w
        name = str(v.name)
        subscores.update({f"{name}/{k}": _clamp(x) for k, x in out.subscores.items()})
        infos[name] = {"kind": v.kind, "weight": v.weight / total_w, "score": value, **out.info}
        if out.output:
            outputs.append(f"== {name} ({v.kind})\n{out.output.rstrip()}")
    return VerifyResult(score=_clamp(score), subscores=subscores, details={"verifiers": infos}, output=_tail("\n".join(outputs)))


async def verify(
    spec: TaskSpec,
    sandbox: Sandbox,
    transcript: dict[str, Any],
    judge: PolicyBackend | None = None,
) -> VerifyResult:
    """Grade the episode that ran in ``sandbox``: kill what is left of it and grade its final
    workspace in a fresh sealed sandbox of the same backend (``grade.grade_final``).

    Call once, after the agent has finished; ``sandbox`` itself is left for the caller to close.
    """
    from clawgym_env.grading.grade import grade_final

    return (await grade_final(spec, sandbox, transcript, judge))[0]
