"""Score a finished episode: hidden files go in only now, then every verifier runs, weighted.

Code and script verifiers run inside the episode's sandbox (the agent's workspace as it left
it); rubric items go to an LLM judge; answers are compared in-process. A verifier that crashes,
prints garbage, returns NaN or times out scores 0 with the reason kept in ``details``; only a
sandbox that cannot run anything at all raises ``VerifierError``.
"""

from __future__ import annotations

import asyncio
import json
import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawgym_env.errors import SandboxError, VerifierError
from clawgym_env.proxy.backends.base import PolicyBackend
from clawgym_env.sandbox.base import Sandbox
from clawgym_env.task.answer import extract_tagged, match_answer
from clawgym_env.task.judge import ask_judge, build_judge_messages
from clawgym_env.task.spec import (
    AnswerVerifier,
    CodeVerifier,
    RubricVerifier,
    ScriptVerifier,
    TaskSpec,
)

__all__ = ["PAYLOAD_PATH", "VerifyResult", "make_transcript", "params_env", "verify"]

PAYLOAD_PATH = "/tmp/.clawgym-verify/reward_payload.json"
"""Where script verifiers find the episode (ClawGym's OPENCLAW_REWARD_PAYLOAD convention)."""
_MARK = "__CLAWGYM_GRADE__ "
_DRIVER = (Path(__file__).with_name("_grade_driver.py")).read_text(encoding="utf-8")
_OUTPUT_CAP = 20_000
_SAFE_ENV = {"PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1"}
"""Keeps files the agent left in HOME or the environment from running inside verifiers."""


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


def make_transcript(
    spec: TaskSpec, final_message: str = "", messages: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
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


async def _exec(sandbox: Sandbox, cmd: list[str], spec: TaskSpec, timeout: float, stdin: bytes | None = None, env: dict[str, str] | None = None) -> Any:
    try:
        return await sandbox.exec(cmd, cwd=spec.workspace_mount, timeout=timeout, stdin=stdin, env=env)
    except SandboxError as exc:
        raise VerifierError(f"verifier for {spec.full_id} could not run in the sandbox: {exc}") from exc


async def _run_code(v: CodeVerifier, spec: TaskSpec, sandbox: Sandbox, transcript: dict[str, Any]) -> _Outcome:
    inside = spec.sandbox_path_of(v.file)
    request = {
        "transcript": transcript,
        "workspace": spec.workspace_mount,
        "file": inside,
        "source": None if inside else spec.host_path(v.file).read_text(encoding="utf-8"),
    }
    # -I: the agent's files (a json.py in the workspace, a usercustomize in HOME) must not load into the grader
    res = await _exec(sandbox, ["python3", "-I", "-c", _DRIVER], spec, v.timeout_s, stdin=json.dumps(request, default=str).encode(),
                      env=_SAFE_ENV)
    output = res.stdout + (("\n[stderr]\n" + res.stderr) if res.stderr.strip() else "")
    if res.timed_out:
        return _Outcome(0.0, {}, {"error": f"grade() ran past {v.timeout_s:g}s"}, output)
    line = next((ln for ln in reversed(res.stdout.splitlines()) if ln.startswith(_MARK)), None)
    if line is None:
        return _Outcome(0.0, {}, {"error": f"grading process exited {res.return_code} without a result"}, output)
    try:
        payload = json.loads(line[len(_MARK) :])
    except ValueError:
        return _Outcome(0.0, {}, {"error": "grading process printed an unreadable result"}, output)
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


async def _upload_payload(sandbox: Sandbox, spec: TaskSpec, transcript: dict[str, Any]) -> None:
    payload = {
        "task_id": spec.full_id,
        "user_query": spec.instruction,
        "metadata": spec.metadata,
        "final_message": transcript.get("final_message", ""),
        "transcript": transcript.get("messages", []),
    }
    with tempfile.TemporaryDirectory(prefix="clawgym-payload-") as tmp:
        path = Path(tmp) / "reward_payload.json"
        path.write_text(json.dumps(payload, default=str), encoding="utf-8")
        try:
            await sandbox.upload(path, PAYLOAD_PATH)
        except SandboxError as exc:
            raise VerifierError(f"cannot copy the reward payload into the sandbox for {spec.full_id}: {exc}") from exc


async def _run_script(v: ScriptVerifier, spec: TaskSpec, sandbox: Sandbox) -> _Outcome:
    inside = spec.sandbox_path_of(v.file)
    if inside:
        cmd = ["bash", inside]
    else:
        cmd = ["bash", "-c", spec.host_path(v.file).read_text(encoding="utf-8"), v.file]
    env = {
        **_SAFE_ENV,
        **params_env(spec),
        "CLAWGYM_WORKSPACE": spec.workspace_mount,
        "CLAWGYM_HIDDEN": spec.hidden_mount,
        "CLAWGYM_TASK_ID": spec.full_id,
        "OPENCLAW_REWARD_PAYLOAD": PAYLOAD_PATH,
    }
    res = await _exec(sandbox, cmd, spec, v.timeout_s, env=env)
    output = res.stdout + (("\n[stderr]\n" + res.stderr) if res.stderr.strip() else "")
    if res.timed_out:
        return _Outcome(0.0, {"score": 0.0}, {"error": f"script ran past {v.timeout_s:g}s"}, output)
    if res.return_code != 0:
        return _Outcome(0.0, {"score": 0.0}, {"error": f"script exited {res.return_code}"}, output)
    lines = [ln.strip() for ln in res.stdout.splitlines() if ln.strip()]
    try:
        value = float(lines[-1]) if lines else math.nan
    except ValueError:
        return _Outcome(0.0, {"score": 0.0}, {"error": f"last line {lines[-1][:80]!r} is not a number"}, output)
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        return _Outcome(0.0, {"score": 0.0}, {"error": f"script printed {value!r}, not a number in [0, 1]"}, output)
    return _Outcome(value, {"score": value}, {}, output)


async def _read_inside(sandbox: Sandbox, path: str, limit: int) -> str | None:
    """A workspace file's text (cut to ``limit`` chars), or None if it is missing."""
    with tempfile.TemporaryDirectory(prefix="clawgym-read-") as tmp:
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
        res = await _exec(sandbox, ["python3", "-c", _GLOB, spec.workspace_mount, pat, str(cap)], spec, 30)
        names.extend(ln for ln in res.stdout.splitlines() if ln.strip() and ln not in names)
    return names[:cap]


async def _run_rubric(
    v: RubricVerifier, spec: TaskSpec, sandbox: Sandbox, transcript: dict[str, Any], judge: PolicyBackend | None
) -> _Outcome:
    final = str(transcript.get("final_message") or "")
    files = {f: await _read_inside(sandbox, f, v.max_file_chars) for f in await _expand(sandbox, spec, v.files)}
    names = [item.name or f"item{i + 1}" for i, item in enumerate(v.items)]
    if not final.strip() and all(t is None or not t.strip() for t in files.values()):
        verdicts = {n: {"score": 0.0, "verdict": None, "reasoning": "nothing to judge: no final message, no files"} for n in names}
        return _Outcome(0.0, dict.fromkeys(names, 0.0), {"items": verdicts})
    if judge is None:
        return _Outcome(0.0, dict.fromkeys(names, 0.0), {"error": "no judge backend configured for this rubric (pass a judge)"})
    calls = [
        ask_judge(judge, build_judge_messages(item, spec.instruction, final, files), item,
                  session_id=f"judge:{spec.full_id}:{v.name}", call_index=i)
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


async def _run_answer(v: AnswerVerifier, spec: TaskSpec, sandbox: Sandbox, transcript: dict[str, Any]) -> _Outcome:
    if v.source == "final_message":
        text: str | None = str(transcript.get("final_message") or "")
    else:
        text = await _read_inside(sandbox, v.source[len("file:") :], 100_000)
    if text is None:
        return _Outcome(0.0, {"match": 0.0}, {"error": f"{v.source} does not exist", "extracted": None})
    found = extract_tagged(text, v.tag)
    if found is None and v.source != "final_message":
        found = text.strip()  # an answer file may hold the bare answer
    ok = any(match_answer(found, e, v.tolerance) for e in v.expected)
    info: dict[str, Any] = {"extracted": found, "expected": v.expected}
    if found is None:
        info["error"] = f"no <{v.tag}>...</{v.tag}> in the {v.source.replace('_', ' ')}"
    return _Outcome(1.0 if ok else 0.0, {"match": 1.0 if ok else 0.0}, info)


async def verify(
    spec: TaskSpec,
    sandbox: Sandbox,
    transcript: dict[str, Any],
    judge: PolicyBackend | None = None,
) -> VerifyResult:
    """Copy the hidden files in, run every verifier, and combine their scores by weight.

    Call once, after the agent has finished: the hidden files stay in the sandbox afterwards.
    """
    if spec.hidden_dir is not None:
        try:
            # whatever the agent put where the hidden files go (e.g. <workspace>/reward/json.py) must not mix with them;
            # never on the "none" backend, whose commands see the real host filesystem
            if sandbox.name != "none":
                await sandbox.exec(["rm", "-rf", "--", spec.hidden_mount], timeout=60)
            await sandbox.upload(spec.hidden_dir, spec.hidden_mount)
        except SandboxError as exc:
            raise VerifierError(f"cannot copy hidden files of {spec.full_id} into the sandbox: {exc}") from exc
    if any(isinstance(v, ScriptVerifier) for v in spec.verifiers):
        await _upload_payload(sandbox, spec, transcript)
    total_w = sum(v.weight for v in spec.verifiers)
    subscores: dict[str, float] = {}
    infos: dict[str, Any] = {}
    outputs: list[str] = []
    score = 0.0
    for v in spec.verifiers:
        if isinstance(v, CodeVerifier):
            out = await _run_code(v, spec, sandbox, transcript)
        elif isinstance(v, ScriptVerifier):
            out = await _run_script(v, spec, sandbox)
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
    return VerifyResult(
        score=_clamp(score), subscores=subscores, details={"verifiers": infos}, output=_tail("\n".join(outputs))
    )
