"""Qwen Code (npm ``@qwen-code/qwen-code``), unmodified, run headless with ``qwen -p``.

A Gemini CLI fork that speaks OpenAI Chat Completions (``--auth-type openai``), always streaming,
with the proxy as ``OPENAI_BASE_URL``. Usage statistics, telemetry and auto-update are switched off
in the settings file we write. Its own record of the run is the ``--output-format json`` result on
stdout (a JSON list of events; the final ``result`` event's ``num_turns`` and ``stats``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from clawgym_env.harness import HarnessSession
from harnesses.gemini_cli import total_requests
from harnesses.npm import NpmCli

__all__ = ["QwenCode"]

PACKAGE = "@qwen-code/qwen-code"
INSIDE = "/opt/clawgym/qwen-code"
ENTRY = f"node_modules/{PACKAGE}/cli.js"

SETTINGS = {
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False, "logPrompts": False},
    "general": {"disableAutoUpdate": True, "disableUpdateNag": True, "enableAutoUpdate": False, "checkpointing": {"enabled": False}},
    "security": {"auth": {"selectedType": "openai"}, "folderTrust": {"enabled": False}},
    "ide": {"enabled": False},
}
"""Written to ``~/.qwen/settings.json``: nothing leaves the sandbox but model calls to the proxy."""


class QwenCode(NpmCli):
    """``qwen -p <task> --yolo --output-format json --auth-type openai`` on the cached Node 24."""

    name: ClassVar[str] = "qwen-code"
    version: ClassVar[str] = "0.24.4"
    dialect: ClassVar[str] = "openai-chat"
    memory_mb: ClassVar[int] = 2048
    """Sandbox memory floor (MB) this harness needs, whatever the task asks."""
    transcript: ClassVar[str] = "stdout"
    """Its own record: the JSON result it prints."""

    package: ClassVar[str] = PACKAGE
    inside: ClassVar[str] = INSIDE
    entry: ClassVar[str] = ENTRY

    def build_env(self, session: HarnessSession) -> Mapping[str, str]:
        return self.cli_env(
            session,
            {
                "OPENAI_BASE_URL": f"{session.base_url}/v1",
                "OPENAI_API_KEY": session.api_key,
                "OPENAI_MODEL": session.model,
                "QWEN_CODE_NO_RELAUNCH": "true",
                "NO_BROWSER": "true",
            },
        )

    def build_command(self, instruction: str, session: HarnessSession) -> list[str]:
        return self.cli("-p", instruction, "--yolo", "--auth-type", "openai", "--output-format", "json", "--model", session.model)

    def write_configs(self, session: HarnessSession) -> dict[str, str]:
        return {f"{session.home}/.qwen/settings.json": json.dumps(SETTINGS, indent=2) + "\n"}

    def count_calls(self, record: Path) -> int:
        """Model calls Qwen Code counted itself: ``totalRequests`` in the stats of its final ``result`` event."""
        stdout = self.read_own_record(record)
        start = stdout.find("[")
        events = json.loads(stdout[start:]) if start >= 0 else []
        result = next((e for e in reversed(events) if isinstance(e, dict) and e.get("type") == "result"), {})
        return total_requests(result.get("stats") or {})
