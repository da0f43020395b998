"""pi (npm ``@mariozechner/pi-coding-agent``), unmodified, run headless with ``pi --mode json``.

Its only provider is the proxy, declared in ``~/.pi/agent/models.json`` (``api: openai-completions``:
OpenAI Chat Completions, streamed). ``--offline`` / ``PI_OFFLINE`` switch off every start-up
network operation (version check, package update check, install telemetry to pi.dev). Its own
record is the JSON event stream on stdout: one assistant ``message_end`` per model call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from clawgym_env.harness import HarnessSession
from harnesses.npm import NpmCli

__all__ = ["Pi"]

PACKAGE = "@mariozechner/pi-coding-agent"
INSIDE = "/opt/clawgym/pi"
ENTRY = f"node_modules/{PACKAGE}/dist/cli.js"
PROVIDER = "clawgym"


class Pi(NpmCli):
    """``pi --mode json --offline --provider clawgym --model <model> <task>`` on the cached Node 24."""

    name: ClassVar[str] = "pi"
    version: ClassVar[str] = "0.73.1"
    dialect: ClassVar[str] = "openai-chat"
    memory_mb: ClassVar[int] = 1024
    """Sandbox memory floor (MB) this harness needs, whatever the task asks."""
    transcript: ClassVar[str] = "stdout"
    """Its own record: the JSON events it prints."""
    package: ClassVar[str] = PACKAGE
    inside: ClassVar[str] = INSIDE
    entry: ClassVar[str] = ENTRY

    def build_env(self, session: HarnessSession) -> Mapping[str, str]:
        return self.cli_env(session, {"PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"})

    def build_command(self, instruction: str, session: HarnessSession) -> list[str]:
        return self.cli("--mode", "json", "--offline", "--no-session", "--provider", PROVIDER, "--model", session.model, instruction)

    def write_configs(self, session: HarnessSession) -> dict[str, str]:
        models = {
            "providers": {
                PROVIDER: {
                    "baseUrl": f"{session.base_url}/v1",
                    "api": "openai-completions",
                    "apiKey": session.api_key,
                    "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
                    "models": [
                        {
                            "id": session.model,
                            "name": session.model,
                            "reasoning": False,
                            "input": ["text"],
                            "contextWindow": 131072,
                            "maxTokens": 4096,
                            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                        }
                    ],
                }
            }
        }
        settings = {"enableInstallTelemetry": False, "defaultProvider": PROVIDER, "defaultModel": session.model}
        agent = f"{session.home}/.pi/agent"
        return {
            f"{agent}/models.json": json.dumps(models, indent=2) + "\n",
            f"{agent}/settings.json": json.dumps(settings, indent=2) + "\n",
        }

    def count_calls(self, record: Path) -> int:
        """Model calls pi recorded itself: ``message_end`` events of assistant messages."""
        n = 0
        for line in self.read_own_record(record).splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("type") == "message_end":
                n += (event.get("message") or {}).get("role") == "assistant"
        return n
