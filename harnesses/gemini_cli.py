"""Gemini CLI (npm ``@google/gemini-cli``), unmodified, run headless with ``gemini -p``.

It speaks the Gemini API (``streamGenerateContent?alt=sse``) through the ``@google/genai`` SDK;
``GOOGLE_GEMINI_BASE_URL`` points it at the proxy (auth type "gemini-api-key", key in ``GEMINI_API_KEY``,
sent as ``x-goog-api-key``). Usage statistics (Clearcut), telemetry, auto-update and update nags are
switched off in the settings file we write. Its own record of the run is the ``--output-format
json`` envelope on stdout, whose ``stats`` count the API requests per model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from clawgym_env.harness import HarnessSession
from harnesses.npm import NpmCli

__all__ = ["GeminiCli", "total_requests"]

PACKAGE = "@google/gemini-cli"
INSIDE = "/opt/clawgym/gemini-cli"
ENTRY = f"node_modules/{PACKAGE}/bundle/gemini.js"

SETTINGS = {
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False, "logPrompts": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False, "checkpointing": {"enabled": False}},
    "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
    "ide": {"enabled": False},
    "ui": {"hideTips": True, "hideBanner": True},
}
"""Written to ``~/.gemini/settings.json``: nothing leaves the sandbox but model calls to the proxy."""


class GeminiCli(NpmCli):
    """``gemini -p <task> --yolo --output-format json`` on the cached Node 24, its only endpoint the proxy."""

    name: ClassVar[str] = "gemini-cli"
    version: ClassVar[str] = "0.61.0"
    dialect: ClassVar[str] = "gemini"
    memory_mb: ClassVar[int] = 2048
    """Sandbox memory floor (MB) this harness needs, whatever the task asks."""
    transcript: ClassVar[str] = "stdout"
    """Its own record: the JSON envelope it prints (``stats.models.*.api.totalRequests``)."""

    package: ClassVar[str] = PACKAGE
    inside: ClassVar[str] = INSIDE
    entry: ClassVar[str] = ENTRY

    def build_env(self, session: HarnessSession) -> Mapping[str, str]:
        return self.cli_env(
            session,
            {
                "GOOGLE_GEMINI_BASE_URL": session.base_url,
                "GEMINI_API_KEY": session.api_key,
                "GEMINI_MODEL": session.model,
                "GEMINI_TELEMETRY_ENABLED": "false",
                "GEMINI_CLI_NO_RELAUNCH": "true",
                "NO_BROWSER": "true",
            },
        )

    def build_command(self, instruction: str, session: HarnessSession) -> list[str]:
        return self.cli("-p", instruction, "--yolo", "--output-format", "json", "--model", session.model)

    def write_configs(self, session: HarnessSession) -> dict[str, str]:
        return {f"{session.home}/.gemini/settings.json": json.dumps(SETTINGS, indent=2) + "\n"}

    def count_calls(self, record: Path) -> int:
        """Model calls Gemini CLI counted itself, from the ``stats`` of the JSON envelope it prints."""
        stdout = self.read_own_record(record)
        start = stdout.find("{")
        envelope = json.loads(stdout[start:]) if start >= 0 else {}
        return total_requests(envelope.get("stats") or {})


def total_requests(stats: dict[str, Any]) -> int:
    """``stats.models.<model>.api.totalRequests`` summed over models (Gemini CLI and its fork Qwen Code)."""
    return sum(int((m.get("api") or {}).get("totalRequests", 0)) for m in (stats.get("models") or {}).values())
