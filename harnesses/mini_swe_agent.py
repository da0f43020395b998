"""mini-swe-agent (PyPI ``mini-swe-agent``), unmodified, in its own venv in the harness cache.

``python -m minisweagent.run.mini`` in yolo mode with litellm's OpenAI provider pointed at the
proxy: OpenAI Chat Completions, not streamed, one ``bash`` tool. It finishes when the model runs
``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``. litellm's start-up fetch of its model price map
(raw.githubusercontent.com) is switched off with ``LITELLM_LOCAL_MODEL_COST_MAP``, and cost tracking
ignores the unknown model. Its own record is the trajectory file (``info.model_stats.api_calls``).
The venv is built by the interpreter running ClawGym, whose prefix is bound read-only in the sandbox.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from clawgym_env.errors import HarnessInstallError
from clawgym_env.harness import Harness, HarnessSession
from clawgym_env.harness_install import install_pip_package, installed_root, is_installed
from clawgym_env.sandbox.base import Mount
from harnesses.npm import SANDBOX_PATH, base_env

__all__ = ["MiniSweAgent"]

PACKAGE = "mini-swe-agent"
INSIDE = "/opt/clawgym/mini-swe-agent"
TRAJECTORY = ".mini-swe-agent/trajectory.json"
"""Where the run writes its trajectory (relative to HOME)."""


class MiniSweAgent(Harness):
    """``python -m minisweagent.run.mini -y --exit-immediately`` against the proxy, from its own venv."""

    name: ClassVar[str] = "mini-swe-agent"
    version: ClassVar[str] = "2.4.6"
    dialect: ClassVar[str] = "openai-chat"
    memory_mb: ClassVar[int] = 1024
    """Sandbox memory floor (MB) this harness needs, whatever the task asks."""
    transcript: ClassVar[str] = ".mini-swe-agent"
    """Its own record: the folder holding trajectory.json."""

    def install(self, cache_dir: Path) -> Path:
        return install_pip_package(PACKAGE, self.version, cache_dir=cache_dir, check=["venv/bin/python"])

    def mounts(self, cache_dir: Path) -> tuple[Mount, ...]:
        root = installed_root(PACKAGE, self.version, cache_dir)
        if not is_installed(PACKAGE, self.version, cache_dir):
            raise HarnessInstallError(
                f"{self.name} {self.version} is not installed in {root.parent}; run `clawgym harness install {self.name}`"
            )
        mounts = [Mount(host=root, inside=INSIDE)]
        prefix = Path(sys.base_prefix)  # the venv's interpreter lives here
        if not str(prefix).startswith(("/usr", "/bin", "/lib")):
            mounts.append(Mount(host=prefix, inside=str(prefix)))
        return tuple(mounts)

    def build_env(self, session: HarnessSession) -> Mapping[str, str]:
        return base_env(
            session.home,
            f"{INSIDE}/venv/bin:{SANDBOX_PATH}",
            OPENAI_API_KEY=session.api_key,
            OPENAI_API_BASE=f"{session.base_url}/v1",
            OPENAI_BASE_URL=f"{session.base_url}/v1",
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            LITELLM_TELEMETRY="False",
            MSWEA_CONFIGURED="true",
            MSWEA_COST_TRACKING="ignore_errors",
            MSWEA_SILENT_STARTUP="1",
            MSWEA_GLOBAL_CONFIG_DIR=f"{session.home}/.mini-swe-agent",
            MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT="1",
            PYTHONDONTWRITEBYTECODE="1",
        )

    def build_command(self, instruction: str, session: HarnessSession) -> list[str]:
        return [
            f"{INSIDE}/venv/bin/python",
            "-m",
            "minisweagent.run.mini",
            "-t",
            instruction,
            "-y",
            "--exit-immediately",
            "-m",
            f"openai/{session.model}",
            "-l",
            "0",
            "-o",
            f"{session.home}/{TRAJECTORY}",
        ]

    def count_calls(self, record: Path) -> int:
        """Model calls mini-swe-agent counted itself: ``info.model_stats.api_calls`` in its trajectory."""
        folder = self.own_record(record)
        path = folder / Path(TRAJECTORY).name if folder is not None else None
        if path is None or not path.is_file():
            return 0
        return int(json.loads(path.read_text())["info"]["model_stats"]["api_calls"])
