"""One episode, end to end: sandbox -> unmodified harness -> proxy -> verifier -> result.

``run_episode`` is what the benchmark runner, the trainers and the Gym envs call. It seeds a
sandbox with the task's workspace, mounts the harness install and the proxy socket, opens a
proxy session (the only way out of the sandbox) and runs the harness's headless command under the
task's wall-time limit. Whatever happens to the harness (clean exit, crash, hang, output flood,
call budget exhausted) becomes a ``status``, never a leftover process: the sandbox is closed
before returning. When the harness exits every process of the episode is killed; grading then
runs in a fresh, sealed sandbox over the final workspace (``clawgym_env.grading.grade.grade_final``:
on bwrap its layers, stacked read-only without a copy; else a copy taken out), and the agent's
sandbox, with nothing left running in it, is closed after. On bwrap that grading sandbox and its
graders' interpreters are started while the harness runs (``EarlyGrading``); they see the agent's
work, and read it, only once every agent process is dead.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from clawgym_env.capture.records import CallRecord
from clawgym_env.errors import ClawGymError, ConfigError, episode_context
from clawgym_env.harness import STDOUT_LOG, Harness, HarnessSession
from clawgym_env.harness_install import cache_root
from clawgym_env.harness_registry import load_harness
from clawgym_env.proxy.backends.base import PolicyBackend
from clawgym_env.proxy.egress import egress_env
from clawgym_env.sandbox import Sandbox, SandboxConfig, create_sandbox
from clawgym_env.sandbox._bwrap_host import scratch_dir
from clawgym_env.sandbox._fs import copy_tree_safely
from clawgym_env.sandbox._sweep import tagged_tempdir

if TYPE_CHECKING:
    from clawgym_env.grading.grade import EarlyGrading
    from clawgym_env.proxy import ProxyServer
    from clawgym_env.task import TaskSpec

__all__ = ["EpisodeResult", "EpisodeStatus", "resolve_task", "run_episode", "save_workspace", "transcript_for_verifier"]

EpisodeStatus = Literal["completed", "error", "timeout", "truncated", "crashed"]

HOME = "/tmp/home"
"""Fixed HOME inside the sandbox, so paths in the harness's prompts are byte-stable."""
FLOOD_BYTES = 64 * 1024 * 1024
"""A harness writing more than this to stdout+stderr is killed as flooding ("crashed")."""
KEEP_STDOUT_BYTES = 16 * 1024 * 1024
"""How much of the harness's stdout is kept as its transcript (``stdout.log``)."""
_TAIL = 4000


@dataclass
class EpisodeResult:
    """What one episode produced; ``status`` says how it ended, ``score`` what the verifier gave."""

    session_id: str
    task_id: str
    harness: str
    status: EpisodeStatus
    """"completed" (harness exited 0), "crashed" (non-zero exit, killed, output flood),
    "timeout" (wall time), "truncated" (model-call budget), "error" (infrastructure failed)."""
    score: float = 0.0
    subscores: dict[str, float] = field(default_factory=dict)
    verifier_output: str = ""
    error: str | None = None
    calls: list[CallRecord] = field(default_factory=list)
    harness_exit_code: int | None = None
    harness_output_tail: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds: "sandbox" (start), "harness" (process), "model" (inside the backend), "collect" (transcript
    and capture), "verifier" (after the agent; the early grader's start is not in it), "cleanup" (closing
    the agent's and the grading sandbox), "total"."""
    capture_path: Path | None = None
    transcript_path: Path | None = None
    """Folder with the harness's own transcript, next to the capture: ``stdout.log`` (Claude Code's
    stream-json, OpenClaw's --json envelope) and the harness's state files (OpenClaw: its sqlite)."""
    splice_hit_rate: float = 0.0
    egress_attempts: list[str] = field(default_factory=list)
    """Network targets the harness (or the agent's commands) tried to reach besides the proxy, e.g.
    ``"CONNECT play.googleapis.com:443"``; each was refused (see ``clawgym_env.proxy.egress``)."""
    limit_hit: str | None = None
    """"memory", "pids" or "output" when the sandbox stopped a "crashed" harness at one of its limits: the
    agent's own doing (a flood of files or output), so trainers take the verdict of what it left."""
    notes: list[str] = field(default_factory=list)
    """What was done to the episode's output that a reader should know (e.g. special files left out)."""

    @property
    def final_message(self) -> str:
        """Text of the last assistant message the policy produced."""
        for rec in reversed(self.calls):
            if rec.response and rec.error is None:
                return str(rec.response.get("content") or "")
        return ""


def resolve_task(task: TaskSpec | str) -> TaskSpec:
    """A TaskSpec, from a spec, a full id ``"<suite>/<task>"`` (repo or user suites), or ``"<suite folder>/<task>"``."""
    from clawgym_env.task import TaskRegistry, TaskSpec

    if isinstance(task, TaskSpec):
        return task
    if "/" not in task:
        raise ConfigError(f"task {task!r}: give a full id '<suite>/<task>' (e.g. clawgym-original/smoke-hello-file-p0)")
    folder, _, task_id = task.rpartition("/")
    if (Path(folder) / "suite.yaml").is_file():  # "<suite folder>/<task>"
        from clawgym_env.task import load_suite

        return load_suite(folder).get(task_id)
    return TaskRegistry.default().get(task)


def transcript_for_verifier(task: TaskSpec, calls: list[CallRecord]) -> dict[str, Any]:
    """What verifiers see of an episode: the last answered call's messages and final text (also used to re-grade)."""
    from clawgym_env.grading.verify import make_transcript

    answered = [c for c in calls if c.response is not None and c.error is None]
    messages: list[dict[str, Any]] = []
    final = ""
    if answered:
        last = answered[-1]
        messages = [*last.messages, last.response] if last.response else list(last.messages)
        final = str((last.response or {}).get("content") or "")
    return make_transcript(task, final_message=final, messages=messages)


class _Watch:
    """Counts the harness's output, keeps a tail, and flags a flood."""

    def __init__(self, stop: asyncio.Event, transcript: Path | None) -> None:
        self.stop = stop
        self.bytes = 0
        self.flooded = False
        self.tail = bytearray()
        self._file = open(transcript, "wb") if transcript is not None else None  # noqa: SIM115

    def __call__(self, stream: str, chunk: bytes) -> None:
        self.bytes += len(chunk)
        if self.bytes > FLOOD_BYTES:
            self.flooded = True
            self.stop.set()
            return
        self.tail += chunk
        del self.tail[:-_TAIL]
        if self._file is not None and stream == "stdout" and self.bytes <= KEEP_STDOUT_BYTES:
            self._file.write(chunk)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


async def _run_harness(
    sb: Sandbox,
    cmd: list[str],
    env: dict[str, str],
    cwd: str,
    timeout: float,
    watch: _Watch,
    over_limit: Callable[[], bool],
    alongside: Callable[[], None],
) -> tuple[Any, str | None]:
    """Run the harness; stop it early on output flood or an exhausted call budget. ``alongside`` is called
    once the harness runs (``Sandbox.spawn``: on bwrap, once its command is released from behind the proxy
    bridge), so what it starts does not hold the harness's own start up on this event loop."""
    started = await sb.spawn(cmd, env=env, cwd=cwd, on_output=watch, max_output_bytes=1024 * 1024)
    try:
        alongside()
    except BaseException:
        await started.discard()
        raise
    proc = asyncio.ensure_future(started.finish(None, timeout))  # its stdin closes at once: as from /dev/null
    stopper = asyncio.ensure_future(watch.stop.wait())
    try:
        while not proc.done():
            await asyncio.wait({proc, stopper}, timeout=0.1, return_when=asyncio.FIRST_COMPLETED)
            if watch.flooded:
                reason = "output_flood"
            elif over_limit():
                reason = "over_limit"
            else:
                continue
            proc.cancel()  # the sandbox kills the whole process tree on cancellation
            with contextlib.suppress(asyncio.CancelledError):
                await proc
            return None, reason
        return proc.result(), None
    finally:
        stopper.cancel()
        if not proc.done():
            proc.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await proc


async def run_episode(
    task: TaskSpec | str,
    harness: Harness | str,
    backend: PolicyBackend,
    *,
    proxy: ProxyServer | None = None,
    sandbox: str = "bwrap",
    capture_dir: Path | None = None,
    workspace_out: Path | None = None,
    cache_dir: Path | None = None,
    judge: PolicyBackend | None = None,
    sampling: dict[str, Any] | None = None,
    session_id: str | None = None,
    model_name: str = "policy",
    wall_time_s: float | None = None,
) -> EpisodeResult:
    """Run one task with one harness against ``backend`` and return how it went.

    ``proxy`` must be started with a ``uds_path`` (the sandbox reaches it through that socket);
    None starts a private one for this episode. ``capture_dir`` receives ``<session>.jsonl``
    (our capture) and the harness's own transcript next to it. ``workspace_out`` receives the
    final workspace. ``wall_time_s`` overrides the task's limit; it covers the whole harness run,
    including time the policy takes to answer. Infrastructure failures
    (sandbox, missing install) give ``status="error"`` with the reason; programming errors raise.
    """
    if proxy is None:
        from clawgym_env.proxy import ProxyServer

        with tagged_tempdir("proxy") as d:
            async with ProxyServer(uds_path=Path(d) / "proxy.sock") as own:
                return await run_episode(
                    task,
                    harness,
                    backend,
                    proxy=own,
                    sandbox=sandbox,
                    capture_dir=capture_dir,
                    workspace_out=workspace_out,
                    cache_dir=cache_dir,
                    judge=judge,
                    sampling=sampling,
                    session_id=session_id,
                    model_name=model_name,
                    wall_time_s=wall_time_s,
                )
    if proxy.uds_path is None:
        raise ConfigError("run_episode(proxy=...): start the ProxyServer with uds_path=... so sandboxes can reach it")
    spec = resolve_task(task)
    adapter = load_harness(harness)
    sid = session_id or f"{adapter.name}-{uuid.uuid4().hex[:12]}"
    t_start = time.perf_counter()
    result = EpisodeResult(session_id=sid, task_id=spec.full_id, harness=adapter.name, status="error")
    capture_path = transcript_path = None
    if capture_dir is not None:
        capture_dir = Path(capture_dir)
        capture_dir.mkdir(parents=True, exist_ok=True)
        capture_path = capture_dir / f"{sid}.jsonl"
        transcript_path = capture_dir / f"{sid}.harness"
    result.capture_path = capture_path
    with episode_context(spec.full_id, sid):
        sess = proxy.open_session(
            backend, session_id=sid, capture_path=capture_path, max_calls=spec.limits.model_calls, sampling=sampling, model_name=model_name
        )
        sb: Sandbox | None = None
        early: asyncio.Future[EarlyGrading | None] | None = None
        session_open = True
        # 0700: the final workspace, host side, made only when it is to be saved
        final_dir = tagged_tempdir("final") if workspace_out is not None else None
        try:
            cache = cache_dir or cache_root()
            config = SandboxConfig(
                workspace_mount=spec.workspace_mount,
                workspace_src=spec.workspace_dir,
                proxy_socket=proxy.uds_path,
                mounts=adapter.mounts(cache),
                memory_mb=max(spec.limits.memory_mb, adapter.memory_mb),
            )
            hs = HarnessSession(
                session_id=sid,
                base_url=f"http://127.0.0.1:{config.proxy_port}",
                api_key=sess.api_key,
                model=model_name,
                workspace=spec.workspace_mount,
                home=HOME,
            )
            t0 = time.perf_counter()
            sb = started = create_sandbox(sandbox, config)
            await sb.start()
            await _write_files(sb, adapter.write_configs(hs))
            result.timings["sandbox"] = time.perf_counter() - t0

            def start_grading() -> None:
                nonlocal early
                if workspace_out is None:  # a saved workspace is copied out and graded from the copy
                    from clawgym_env.grading.grade import EarlyGrading

                    early = asyncio.ensure_future(EarlyGrading.start(spec, started))

            if transcript_path is not None:
                transcript_path.mkdir(parents=True, exist_ok=True)
            watch = _Watch(asyncio.Event(), transcript_path / STDOUT_LOG if transcript_path else None)
            t0 = time.perf_counter()
            try:
                exec_result, stopped = await _run_harness(
                    sb,
                    adapter.build_command(spec.instruction, hs),
                    {**adapter.build_env(hs), **egress_env(sess.egress_key, config.proxy_port)},
                    spec.workspace_mount,
                    wall_time_s or spec.limits.wall_time_s,
                    watch,
                    lambda: sess.over_limit,
                    start_grading,
                )
            finally:
                watch.close()
            result.timings["harness"] = time.perf_counter() - t0
            result.harness_output_tail = watch.tail.decode("utf-8", errors="replace")
            _classify(result, exec_result, stopped, sess.over_limit, sess.calls)

            await sb.reap()  # every process of the episode is gone before anything is read out of it
            t0 = time.perf_counter()
            own_record = adapter.own_record(transcript_path) if transcript_path is not None else None
            if own_record is not None and adapter.transcript != "stdout":
                with contextlib.suppress(ClawGymError):
                    await sb.download(f"{HOME}/{adapter.transcript}", own_record)
            result.transcript_path = transcript_path
            result.calls = await proxy.close_session(sid)
            session_open = False
            result.splice_hit_rate = sess.splice_hit_rate
            result.egress_attempts = [r.path for r in sess.egress]
            result.timings["collect"] = time.perf_counter() - t0
            from clawgym_env.grading.grade import grade_final

            # graded in place where the backend shares the workspace's layers (bwrap); copied out
            # first only to be saved, or where it cannot. Every process of the episode is gone.
            final = Path(final_dir.name) / "workspace" if final_dir is not None else None
            t0 = time.perf_counter()
            vr, skipped = await grade_final(
                spec, sb, transcript_for_verifier(spec, result.calls), judge=judge, copy_to=final, early=await _settled(early)
            )
            result.timings["verifier"] = time.perf_counter() - t0
            if skipped:
                shown = ", ".join(s if len(s) < 160 else "..." + s[-150:] for s in skipped[:10])
                shown += " ..." if len(skipped) > 10 else ""
                result.notes.append(
                    f"final workspace: {len(skipped)} left out (special files, past the disk limit, nested too deep): {shown}"
                )
            t0 = time.perf_counter()
            grading = await _settled(early)
            await asyncio.gather(sb.close(), *([grading.close()] if grading is not None else []))
            result.timings["cleanup"] = time.perf_counter() - t0
            sb = early = None
            result.score, result.subscores, result.verifier_output = vr.score, dict(vr.subscores), vr.output
            if vr.errors and result.error is None:
                result.error = "verifier: " + json.dumps(vr.errors)[:2000]
            if workspace_out is not None and final is not None:
                save_workspace(final, Path(workspace_out))
        except ClawGymError as exc:
            result.status = "error"
            result.error = f"{type(exc).__name__}: {exc}"
        finally:
            if early is not None:
                grading = await _settled(early)
                if grading is not None:
                    await grading.close()
            if session_open:
                with contextlib.suppress(ClawGymError):
                    result.calls = await proxy.close_session(sid)
            if sb is not None:
                t0 = time.perf_counter()
                await sb.close()
                result.timings["cleanup"] = time.perf_counter() - t0
            if final_dir is not None:
                final_dir.cleanup()
            result.timings["model"] = sum(c.backend_s for c in result.calls)
            result.timings["total"] = time.perf_counter() - t_start
    return result


async def _settled(early: asyncio.Future[EarlyGrading | None] | None) -> EarlyGrading | None:
    """The early grading sandbox once started; None if there is none or it could not start (then
    ``grade_final`` starts one afresh, and says why it fails if that fails too)."""
    if early is None:
        return None
    try:
        return await asyncio.shield(early)
    except ClawGymError:
        return None


def _classify(result: EpisodeResult, r: Any, stopped: str | None, over_limit: bool, calls: list[CallRecord]) -> None:
    """Turn how the harness process ended into the episode status."""
    if r is not None:
        result.harness_exit_code = r.return_code
    if stopped == "output_flood":
        result.status, result.error = "crashed", f"harness flooded its output (> {FLOOD_BYTES} bytes); killed"
        result.limit_hit = "output"
    elif over_limit or stopped == "over_limit":
        result.status, result.error = "truncated", "model-call budget of the task exhausted; harness stopped"
    elif r.timed_out:
        result.status, result.error = "timeout", f"harness exceeded the wall-time limit ({r.duration_s:.0f} s); killed"
    elif r.killed_by_limit:
        result.status, result.error = "crashed", f"harness killed by the sandbox's {r.killed_by_limit} limit"
        result.limit_hit = r.killed_by_limit
    elif r.return_code != 0:
        failed = [c for c in calls if c.status >= 500 and c.error]
        # the harness gave up because the policy backend failed (5xx): ours, not the harness's or the agent's. What a
        # request itself asks wrongly (a prompt past the context, a conversation the template refuses) is a 400
        if failed:
            result.status, result.error = "error", f"policy backend failed (call {failed[0].call_index}): {failed[0].error}"
        else:
            result.status, result.error = "crashed", f"harness exited with code {r.return_code}"
    else:
        result.status = "completed"


def save_workspace(final: Path, dest: Path) -> list[str]:
    """Keep a final workspace under ``dest``: files, folders and links only, no setuid/setgid bits,
    readable by this user alone (``runs/`` may be world-readable). Returns the special files skipped."""
    if dest.exists() or dest.is_symlink():
        if dest.is_dir() and not dest.is_symlink():
            shutil.rmtree(dest)
        else:
            dest.unlink()
    dest.parent.mkdir(parents=True, exist_ok=True)
    return copy_tree_safely(final, dest, private=True)


async def _write_files(sb: Sandbox, files: dict[str, str]) -> None:
    """Create the adapter's config files inside the sandbox (staged in a tmpfs scratch folder where there is one)."""
    if not files:
        return
    d = scratch_dir("cfg")
    try:
        for i, (dest, content) in enumerate(sorted(files.items())):
            src = d / f"f{i}"
            src.write_text(content)
            await sb.upload(src, dest)
    finally:
        shutil.rmtree(d, ignore_errors=True)
