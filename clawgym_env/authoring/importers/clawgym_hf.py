"""ClawGym's Hugging Face JSONL (``RUC-AIBOX/ClawGym-Task``): one task per line.

A line holds ``prompt``, ``hook_code`` (the shell command that grades, run from the
workspace), ``input_files`` ([{file_path, content}], where ``reward/...`` files are the hidden
grader) and ``rule``. It becomes the same layout as the directory importer: workspace at
/root/.openclaw/workspace, grader copied to ``<workspace>/reward`` after the agent finishes.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path, PurePosixPath
from typing import Any

from clawgym_env.authoring.importers._write import ImportReport, slug_id, write_task
from clawgym_env.authoring.importers.clawgym import OPENCLAW_WORKSPACE
from clawgym_env.errors import TaskError
from clawgym_env.task.loader import escape_template

__all__ = ["HF_FILENAME", "HF_REPO", "download_clawgym_bench", "import_clawgym_hf", "reward_script"]

HF_REPO = "RUC-AIBOX/ClawGym-Task"
HF_FILENAME = "syn_task.jsonl"

_MEAN = (
    "python3 -c 'import json,sys\n"
    "try:\n    d = json.loads(sys.stdin.read().strip())\nexcept ValueError:\n    d = None\n"
    "if isinstance(d, dict) and d:\n    print(sum(float(v) for v in d.values()) / len(d))\n"
    "elif isinstance(d, (int, float)) and not isinstance(d, bool):\n    print(float(d))\n"
    "else:\n    print(0.0)'"
)


def reward_script(hook: str) -> str:
    """A reward.sh that runs ``hook`` from the workspace and prints the mean of its JSON sub-scores."""
    hook = hook.strip() or f"python3 reward/check.py {OPENCLAW_WORKSPACE}"
    return f'#!/usr/bin/env bash\nset -euo pipefail\ncd "${{CLAWGYM_WORKSPACE:-{OPENCLAW_WORKSPACE}}}"\n{hook} | {_MEAN}\n'


def _safe_rel(path: str) -> str | None:
    p = PurePosixPath(path.replace("\\", "/"))
    if p.is_absolute() or ".." in p.parts or not p.parts:
        return None
    return p.as_posix()


def _task_id(row: dict[str, Any], index: int) -> str:
    for line in str(row.get("origin_template") or "").splitlines():
        if line.strip().startswith("id:"):
            return line.split(":", 1)[1].strip().strip("'\"")
    return str(row.get("task_id") or f"task_{index:05d}")


def import_clawgym_hf(src: Path, stage: Path, report: ImportReport) -> None:
    """Write one task per JSONL line of ``src`` into ``stage``."""
    seen: set[str] = set()
    with src.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                report.skipped.append(f"line {n}: not JSON ({exc})")
                continue
            if not isinstance(row, dict) or not str(row.get("prompt") or "").strip():
                report.skipped.append(f"line {n}: no prompt")
                continue
            original = _task_id(row, n - 1)
            task_id = slug_id(original)
            if task_id in seen:
                report.skipped.append(f"line {n}: duplicate id {task_id}")
                continue
            files = row.get("input_files") or []
            bad = [f for f in files if not isinstance(f, dict) or _safe_rel(str(f.get("file_path", ""))) is None]
            if bad:
                report.skipped.append(f"line {n}: input file path outside the workspace: {bad[0]!r:.80}")
                continue
            seen.add(task_id)
            meta: dict[str, Any] = {"source_format": "clawgym-hf", "original_id": original}
            if row.get("rule"):
                meta["rule"] = row["rule"]
            workspace = [f for f in files if not (_safe_rel(f["file_path"]) or "").startswith("reward/")]
            task: dict[str, Any] = {
                "id": task_id,
                "version": 1,
                "category": "clawgym",
                "difficulty": "medium",
                "instruction": escape_template(str(row["prompt"])),
                **({"workspace": "workspace"} if workspace else {}),
                "workspace_mount": OPENCLAW_WORKSPACE,
                "hidden": "hidden",
                "hidden_mount": "reward",
                "verifiers": [{"kind": "script", "file": "hidden/reward.sh", "name": "reward"}],
                "metadata": meta,
            }
            out = write_task(stage, task)
            (out / "hidden").mkdir(exist_ok=True)
            for f in files:
                rel = _safe_rel(f["file_path"])
                assert rel is not None
                target = out / "hidden" / rel[len("reward/") :] if rel.startswith("reward/") else out / "workspace" / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(str(f.get("content") or ""), encoding="utf-8")
            reward = out / "hidden" / "reward.sh"
            reward.write_text(reward_script(str(row.get("hook_code") or "")), encoding="utf-8")
            reward.chmod(0o755)
            report.tasks += 1


def _reachable(host: str, timeout: float) -> str | None:
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return None
    except OSError as exc:
        return str(exc) or type(exc).__name__


def download_clawgym_bench(timeout: float = 5.0) -> Path:
    """Fetch syn_task.jsonl with huggingface_hub; fail fast, saying what to do, when offline."""
    manual = (
        f"Fix: download {HF_FILENAME} from https://huggingface.co/datasets/{HF_REPO} on a machine with access, then run "
        f"`clawgym tasks import clawgym-hf {HF_FILENAME} --suite clawgym-bench`."
    )
    try:
        from huggingface_hub import hf_hub_download
    except ImportError as exc:
        raise TaskError(f"huggingface_hub is not installed ({exc}). Fix: pip install 'clawgym[hub]'.") from exc
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes")
    if not offline:
        endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").split("://")[-1].split("/")[0]
        why = _reachable(endpoint.split(":")[0], timeout)
        if why is not None:
            offline = True
            reason = f"cannot reach {endpoint} ({why})"
    else:
        reason = "HF_HUB_OFFLINE is set"
    try:
        path = hf_hub_download(repo_id=HF_REPO, filename=HF_FILENAME, repo_type="dataset", local_files_only=offline)
    except Exception as exc:  # every hub failure becomes one clear message
        why = reason if offline else f"{type(exc).__name__}: {exc}"
        raise TaskError(f"cannot pull {HF_REPO}: {why}, and it is not in the local Hugging Face cache. {manual}") from exc
    return Path(path)
