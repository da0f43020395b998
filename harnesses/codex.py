"""Codex CLI (npm ``@openai/codex``), unmodified, run headless with ``codex exec``.

The npm package is a launcher; the real CLI is a static (musl) native binary in the platform
package ``@openai/codex-linux-x64``, which we run directly (no Node needed). Its only model
provider is the proxy, declared in ``$CODEX_HOME/config.toml`` with ``wire_api = "responses"``:
Codex streams every call on the Responses API. Its own record of the session is the rollout
file it writes under ``$CODEX_HOME/sessions``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from clawgym_env.harness import HarnessSession
from harnesses.npm import SANDBOX_PATH, NpmCli

__all__ = ["Codex"]

PACKAGE = "@openai/codex"
INSIDE = "/opt/clawgym/codex"
VENDOR = "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl"
CODEX_HOME = ".codex"
"""Codex's config and state folder, relative to HOME (``CODEX_HOME``)."""


OFF_FEATURES = (
    "plugins",
    "remote_plugin",
    "plugin_sharing",
    "apps",
    "in_app_updates",
    "tool_suggest",
    "skill_mcp_dependency_install",
    "daemon_auto_start",
    "image_generation",
    "browser_use",
    "browser_use_external",
    "computer_use",
    "in_app_browser",
    "multi_agent",
    "goals",
    "api_key_model_discovery",
)
"""Codex features that reach chatgpt.com / api.github.com (plugin and app catalogues, release checks) or add
tools no sandboxed episode can serve (sub-agents, browser, image generation); measured with the proxy's
egress report: with them on, a smoke episode tried ``CONNECT api.github.com:443`` and ``chatgpt.com:443``."""


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


class Codex(NpmCli):
    """``codex exec --json`` with a config whose only model provider is the proxy."""

    name: ClassVar[str] = "codex"
    version: ClassVar[str] = "0.171.0"
    dialect: ClassVar[str] = "openai-responses"
    memory_mb: ClassVar[int] = 1024
    """Sandbox memory floor (MB) this harness needs, whatever the task asks."""
    transcript: ClassVar[str] = CODEX_HOME
    """Where the harness's own transcript is: its CODEX_HOME (rollout files under sessions/)."""
    package: ClassVar[str] = PACKAGE
    inside: ClassVar[str] = INSIDE
    entry: ClassVar[str] = f"{VENDOR}/bin/codex"
    """The native binary, npm's optional linux-x64 dependency of the launcher package."""
    on_node: ClassVar[bool] = False

    def build_env(self, session: HarnessSession) -> Mapping[str, str]:
        return self.cli_env(
            session,
            {"CODEX_HOME": f"{session.home}/{CODEX_HOME}", "CLAWGYM_API_KEY": session.api_key},
            path=f"{INSIDE}/{VENDOR}/codex-path:{SANDBOX_PATH}",
        )

    def build_command(self, instruction: str, session: HarnessSession) -> list[str]:
        return self.cli(
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "--cd",
            session.workspace,
            "--model",
            session.model,
            instruction,
        )

    def write_configs(self, session: HarnessSession) -> dict[str, str]:
        base = session.base_url.rstrip("/") + "/v1"
        lines = [
            f"model = {_toml_str(session.model)}",
            'model_provider = "clawgym"',
            'approval_policy = "never"',
            'sandbox_mode = "danger-full-access"',
            "check_for_update_on_startup = false",
            'web_search = "disabled"',
            'model_reasoning_summary = "none"',
            "",
            "[features]",
            *(f"{f} = false" for f in OFF_FEATURES),
            "",
            "[analytics]",
            "enabled = false",
            "",
            "[feedback]",
            "enabled = false",
            "",
            "[otel]",
            'exporter = "none"',
            "log_user_prompt = false",
            "",
            "[model_providers.clawgym]",
            'name = "ClawGym proxy"',
            f"base_url = {_toml_str(base)}",
            'env_key = "CLAWGYM_API_KEY"',
            'wire_api = "responses"',
            "request_max_retries = 0",
            "stream_max_retries = 0",
            "stream_idle_timeout_ms = 600000",
            "",
        ]
        return {f"{session.home}/{CODEX_HOME}/config.toml": "\n".join(lines)}

    @staticmethod
    def rollout_events(codex_home: Path) -> list[dict[str, Any]]:
        """Codex's own session record: every line of its rollout files, in order."""
        events: list[dict[str, Any]] = []
        for f in sorted(Path(codex_home).rglob("rollout-*.jsonl")):
            for line in f.read_text().splitlines():
                try:
                    events.append(json.loads(line))
                except ValueError:
                    continue
        return events

    def count_calls(self, record: Path) -> int:
        """Model calls Codex recorded itself: one ``token_count`` event per completed response."""
        codex_home = self.own_record(record)
        return sum(
            1
            for e in (self.rollout_events(codex_home) if codex_home is not None else [])
            if e.get("type") == "event_msg"
            and isinstance(e.get("payload"), dict)
            and e["payload"].get("type") == "token_count"
            and e["payload"].get("info")
        )
