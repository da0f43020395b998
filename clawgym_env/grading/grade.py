"""Sealed grading: the verdict of an episode depends on its final workspace and transcript only.

``grade_workspace`` starts a fresh sandbox (new pid namespace or container, nothing running) over
a copy-on-write view of the final workspace and runs the task's verifiers there:

* hidden files are bind-mounted read-only from the task folder on the host, over whatever the
  agent left at that path, so nothing the agent made (a symlink, a script the grader calls)
  can change them, even while a grader runs;
* the reward payload is written by the host into a fresh folder, mounted read-only at
  ``PAYLOAD_PATH``: never through a path the agent could have prepared;
* the sandbox is sealed (``SandboxConfig.sealed``): no process may ptrace or copy descriptors
  from another, no nested namespaces, no capabilities, no proxy;
* code and script verifiers run through drivers that sign their verdict with a per-run key
  (see ``_grade_driver``); a grader killed, timed out or exiting non-zero scores 0 as an error;
* graders run the agent's code only through ``clawgym_grading`` / ``$CLAWGYM_RUN_AGENT``
  (``_agent_jail``): in a nested sandbox (bwrap: another user and pid namespace) or as another
  uid (docker), where it cannot read the hidden files or the payload, reach the grader's
  process or descriptors, or write the workspace; its outputs come back as data, and the
  expected values and the comparison stay in the grader's own process.

``grade_workspace`` re-grades a submitted workspace (leaderboard); ``grade_final`` grades an
episode's sandbox (``verify``, the episode runner), on bwrap without copying its workspace out.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from clawgym_env.errors import ConfigError, SandboxError, VerifierError
from clawgym_env.grading.verify import (
    PAYLOAD_PATH,
    VerifyResult,
    reward_payload,
    run_verifiers,
    spawn_graders,
)
from clawgym_env.proxy.backends.base import PolicyBackend
from clawgym_env.sandbox import (
    FinalLayers,
    Mount,
    Sandbox,
    SandboxConfig,
    create_sandbox,
)
from clawgym_env.sandbox._bwrap_host import scratch_dir
from clawgym_env.sandbox._fs import copy_tree_safely
from clawgym_env.sandbox._sweep import tagged_tempdir
from clawgym_env.sandbox.base import Spawned
from clawgym_env.task.spec import ScriptVerifier, TaskSpec

__all__ = ["EarlyGrading", "grade_final", "grade_workspace"]

_PAYLOAD_DIR = PAYLOAD_PATH.rsplit("/", 1)[0]


def _hidden_inside_workspace(spec: TaskSpec) -> str | None:
    """The hidden mount's path relative to the workspace, if it lies inside it."""
    ws = spec.workspace_mount.rstrip("/") + "/"
    return spec.hidden_mount[len(ws) :].strip("/") if spec.hidden_mount.startswith(ws) else None


def _shadowed(workspace: Path, rel: str) -> bool:
    """True if the agent left anything at (or a symlink along) the path where hidden files go."""
    p = workspace
    for part in rel.split("/"):
        p = p / part
        if p.is_symlink() or (p.exists() and not p.is_dir()):
            return True
    return p.exists()


async def grade_workspace(
    task: TaskSpec,
    workspace_dir: Path,
    transcript: dict[str, Any],
    backend: str = "bwrap",
    judge: PolicyBackend | None = None,
) -> VerifyResult:
    """Grade ``workspace_dir`` (a host folder: the final workspace) for ``task`` in a fresh sealed
    sandbox of ``backend``; ``transcript`` as from ``make_transcript``. The folder is not modified.

    Raises ``VerifierError`` only when no grading sandbox can run at all.
    """
    workspace_dir = Path(workspace_dir)
    if not workspace_dir.is_dir():
        raise ConfigError(f"grade_workspace: {workspace_dir} is not a folder (the final workspace of {task.full_id})")
    return await _grade(task, FinalLayers(workspace_dir, ()), transcript, backend, judge)


async def grade_final(
    task: TaskSpec,
    sandbox: Sandbox,
    transcript: dict[str, Any],
    judge: PolicyBackend | None = None,
    copy_to: Path | None = None,
    early: EarlyGrading | None = None,
) -> tuple[VerifyResult, list[str]]:
    """Grade the episode that ran in ``sandbox`` (left open for the caller to close afterwards):
    reap it, then grade its final workspace in a fresh sealed sandbox of the same backend.

    Where the backend can share the workspace's layers (bwrap) and the hidden files do not go
    inside the workspace, they are stacked read-only under the grading sandbox, with no copy;
    otherwise, or when ``copy_to`` asks for the files too (to save them), the workspace is taken
    out to ``copy_to`` (or a private temp folder) and graded from there. ``early``: the grading
    sandbox ``EarlyGrading.start`` made while the episode ran, used when it stacks those same
    layers (the caller closes it). Returns the result and the special files left out (relative to
    the workspace).
    """
    await sandbox.reap()
    if copy_to is None and not (task.hidden_dir is not None and _hidden_inside_workspace(task)):
        shared = await sandbox.final_layers()  # from here on nothing of the agent's runs or changes
        if shared is not None:
            if early is not None and early.layers == (shared.src, shared.layers):
                return await early.grading.run(transcript, judge, early.spawned), list(shared.skipped)
            return await _grade(task, shared, transcript, sandbox.name, judge), list(shared.skipped)
    with tagged_tempdir("final") as tmp:
        final = copy_to if copy_to is not None else Path(tmp) / "workspace"
        try:
            skipped = await sandbox.download(task.workspace_mount, final)
        except SandboxError as exc:
            raise VerifierError(f"cannot take the final workspace of {task.full_id} out of the sandbox: {exc}") from exc
        return await grade_workspace(task, final, transcript, backend=sandbox.name, judge=judge), skipped


class EarlyGrading:
    """The sealed grading sandbox of an episode, started while the agent still runs, with its graders'
    processes up and blocked on their stdin, so the episode does not wait for their start after the agent.

    It stacks the layers ``Sandbox.layers_ahead`` names, which hold none of the agent's work until
    ``final_layers`` (in ``grade_final``, after every agent process is dead) moves it in; its graders read
    the workspace only once given their request, after that. The agent cannot reach it: other
    namespaces (pid, ipc, net, user, mount), no shared folder but that layer. ``start`` returns None
    where this cannot work (no shareable layers, hidden files inside the workspace); ``close`` always.
    """

    def __init__(self, grading: _Grading, layers: tuple[Path | None, tuple[Path, ...]]) -> None:
        self.grading = grading
        self.layers = layers
        self.spawned: list[Spawned | None] = []

    @classmethod
    async def start(cls, task: TaskSpec, sandbox: Sandbox) -> EarlyGrading | None:
        ahead = sandbox.layers_ahead()
        if ahead is None or (task.hidden_dir is not None and _hidden_inside_workspace(task)):
            return None
        early = cls(_Grading(task, ahead, sandbox.name), (ahead.src, ahead.layers))
        try:
            await early.grading.start()
            early.spawned = await spawn_graders(task, early.grading.sandbox)
        except BaseException:
            await early.close()
            raise
        return early

    async def close(self) -> None:
        for s in self.spawned:
            if s is not None:
                await s.discard()
        await self.grading.close()


class _Grading:
    """One sealed grading sandbox over a final workspace: hidden files and payload folder mounted."""

    def __init__(self, task: TaskSpec, ws: FinalLayers, backend: str) -> None:
        self.task, self.ws, self.backend = task, ws, backend
        self.staging = scratch_dir("grade")  # 0700; tmpfs where there is one (an ext4 temp dir cost ~8 ms an episode)
        self.payload_dir: Path | None = None
        self.mounts: list[Mount] = []
        self._sb: Sandbox | None = None

    @property
    def sandbox(self) -> Sandbox:
        assert self._sb is not None, "start() first"
        return self._sb

    async def start(self) -> None:
        task, ws = self.task, self.ws
        lower = ws.src
        rel = _hidden_inside_workspace(task) if task.hidden_dir is not None else None
        if rel and ws.layers:
            raise ConfigError(f"{task.full_id}: its hidden files go inside the workspace; grade a copy, not layers")
        if rel and lower is not None and _shadowed(lower, rel):  # the agent put something where the hidden files go
            lower = self.staging / "workspace"
            copy_tree_safely(ws.src, lower)  # type: ignore[arg-type]  # bwrap layers have a source
            victim = lower / rel.split("/")[0]
            if victim.is_symlink() or victim.is_file():
                victim.unlink()
            else:
                shutil.rmtree(victim)
        if task.hidden_dir is not None:
            self.mounts.append(Mount(host=task.hidden_dir, inside=task.hidden_mount))
        if any(isinstance(v, ScriptVerifier) for v in task.verifiers):
            self.payload_dir = self.staging / "payload"  # filled by run(): a bind shows it as it is then
            self.payload_dir.mkdir()
            os.chmod(self.payload_dir, 0o755)
            self.mounts.append(Mount(host=self.payload_dir, inside=_PAYLOAD_DIR))
        config = SandboxConfig(
            workspace_mount=task.workspace_mount, workspace_src=lower, workspace_layers=ws.layers,
            mounts=tuple(self.mounts), memory_mb=task.limits.memory_mb, sealed=True,
        )  # fmt: skip
        try:
            self._sb = create_sandbox(self.backend, config)
            await self._sb.start()
        except SandboxError as exc:
            raise VerifierError(f"cannot start the grading sandbox for {task.full_id}: {exc}") from exc

    async def run(
        self, transcript: dict[str, Any], judge: PolicyBackend | None, spawned: list[Spawned | None] | None = None
    ) -> VerifyResult:
        if self.payload_dir is not None:
            (self.payload_dir / PAYLOAD_PATH.rsplit("/", 1)[1]).write_text(
                json.dumps(reward_payload(self.task, transcript), default=str), encoding="utf-8"
            )
        try:
            if self.backend == "none":  # no mounts there: copy in (no isolation to speak of anyway)
                for m in self.mounts:
                    await self.sandbox.upload(m.host, m.inside)
            return await run_verifiers(self.task, self.sandbox, transcript, judge, spawned)
        except SandboxError as exc:
            raise VerifierError(f"cannot start the grading sandbox for {self.task.full_id}: {exc}") from exc

    async def close(self) -> None:
        try:
            if self._sb is not None:
                await self._sb.close()
        finally:
            shutil.rmtree(self.staging, ignore_errors=True)


async def _grade(task: TaskSpec, ws: FinalLayers, transcript: dict[str, Any], backend: str, judge: PolicyBackend | None) -> VerifyResult:
    grading = _Grading(task, ws, backend)
    try:
        await grading.start()
        return await grading.run(transcript, judge)
    finally:
        await grading.close()
