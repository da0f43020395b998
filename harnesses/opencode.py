"""OpenCode (npm ``opencode-ai``), unmodified, run headless with ``opencode run --format json``.

The npm package's postinstall puts the platform binary (a Bun single-file executable) at
``bin/opencode.exe``; no Node runs it. Its only provider is the proxy, declared in the config we
pass as ``OPENCODE_CONFIG`` through the bundled ``@ai-sdk/openai-compatible`` provider: OpenAI
Chat Completions, streamed. The models.dev catalogue fetch, auto-update, sharing, default plugins
(npm-installed at run time otherwise), LSP downloads and Claude Code prompt/skill imports are
switched off, and its start-up npm install of ``@opencode-ai/plugin`` into the config folder (for
custom tools, which we do not use) runs with ``npm_config_offline``: it fails at once instead of
reaching registry.npmjs.org (measured: an egress attempt per episode otherwise). OpenCode's file search
runs ripgrep, which it downloads from GitHub at run time when no ``rg`` is on PATH (measured in the minimal
docker image: ``CONNECT github.com:443``); the adapter installs ripgrep from its PyPI wheel into the
harness cache and puts it first on the sandbox's PATH, so nothing is fetched on either backend. Its own
record is its JSON event stream on stdout (one ``step_finish`` per model call).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from clawgym_env.errors import HarnessInstallError
from clawgym_env.harness import STDOUT_LOG, HarnessSession
from clawgym_env.harness_install import install_wheel_binary, installed_root, is_installed
from clawgym_env.sandbox.base import Mount
from harnesses.npm import SANDBOX_PATH, NpmCli

__all__ = ["OpenCode"]

PACKAGE = "opencode-ai"
INSIDE = "/opt/clawgym/opencode"
BINARY = f"node_modules/{PACKAGE}/bin/opencode.exe"
PROVIDER = "clawgym"
RIPGREP = ("ripgrep", "14.1.0")
"""PyPI wheel shipping ``rg`` (OpenCode would download ripgrep 15.1.0 from GitHub; any 13+ serves its calls)."""
RIPGREP_INSIDE = "/opt/clawgym/ripgrep"
OFF = (
    "AUTOUPDATE",
    "MODELS_FETCH",
    "SHARE",
    "DEFAULT_PLUGINS",
    "LSP_DOWNLOAD",
    "CLAUDE_CODE",
    "CLAUDE_CODE_PROMPT",
    "CLAUDE_CODE_SKILLS",
    "EXTERNAL_SKILLS",
    "EMBEDDED_WEB_UI",
    "TERMINAL_TITLE",
    "PROJECT_CONFIG",
)
"""``OPENCODE_DISABLE_<name>=1`` for each: everything that would reach past the proxy or read ambient config."""


class OpenCode(NpmCli):
    """``opencode run <task> --format json --model clawgym/<model>`` with a config naming only the proxy."""

    name: ClassVar[str] = "opencode"
    version: ClassVar[str] = "1.18.33"
    dialect: ClassVar[str] = "openai-chat"
    memory_mb: ClassVar[int] = 2048
    """Sandbox memory floor (MB) this harness needs, whatever the task asks."""
    transcript: ClassVar[str] = ".local/share/opencode"
    """Its own record: the JSON events it prints."""

    package: ClassVar[str] = PACKAGE
    inside: ClassVar[str] = INSIDE
    entry: ClassVar[str] = BINARY
    on_node: ClassVar[bool] = False

    def install(self, cache_dir: Path) -> Path:
        install_wheel_binary(*RIPGREP, "rg", cache_dir=cache_dir)
        return super().install(cache_dir)

    def mounts(self, cache_dir: Path) -> tuple[Mount, ...]:
        rg = installed_root(*RIPGREP, cache_dir)
        if not is_installed(*RIPGREP, cache_dir):
            raise HarnessInstallError(
                f"ripgrep {RIPGREP[1]} (which OpenCode needs) is not installed in {rg.parent}; run `clawgym harness install {self.name}`"
            )
        return (*super().mounts(cache_dir), Mount(host=rg / "bin", inside=f"{RIPGREP_INSIDE}/bin"))

    def _config_path(self, session: HarnessSession) -> str:
        return f"{session.home}/.opencode-clawgym.json"

    def build_env(self, session: HarnessSession) -> Mapping[str, str]:
        return self.cli_env(
            session,
            {
                "OPENCODE_CONFIG": self._config_path(session),
                "OPENCODE_PURE": "1",
                "CLAWGYM_API_KEY": session.api_key,
                "npm_config_offline": "true",
                **{f"OPENCODE_DISABLE_{name}": "1" for name in OFF},
            },
            path=f"{RIPGREP_INSIDE}/bin:{SANDBOX_PATH}",
        )

    def build_command(self, instruction: str, session: HarnessSession) -> list[str]:
        return self.cli(
            "run", instruction, "--format", "json", "--model", f"{PROVIDER}/{session.model}", "--dir", session.workspace, "--auto"
        )

    def write_configs(self, session: HarnessSession) -> dict[str, str]:
        config = {
            "$schema": "https://opencode.ai/config.json",
            "model": f"{PROVIDER}/{session.model}",
            "small_model": f"{PROVIDER}/{session.model}",
            "autoupdate": False,
            "share": "disabled",
            "enabled_providers": [PROVIDER],
            "provider": {
                PROVIDER: {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "ClawGym proxy",
                    "options": {"baseURL": f"{session.base_url}/v1", "apiKey": "{env:CLAWGYM_API_KEY}"},
                    "models": {session.model: {"name": session.model, "tool_call": True, "limit": {"context": 131072, "output": 4096}}},
                }
            },
            "permission": {"edit": "allow", "bash": "allow", "webfetch": "deny"},
            "agent": {"title": {"disable": True}},
        }
        return {self._config_path(session): json.dumps(config, indent=2) + "\n"}

    def count_calls(self, record: Path) -> int:
        """Model calls OpenCode recorded itself: ``step_finish`` events (one per model response) on its stdout."""
        stdout = record / STDOUT_LOG
        n = 0
        for line in (stdout.read_text(encoding="utf-8", errors="replace") if stdout.is_file() else "").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            n += isinstance(event, dict) and event.get("type") == "step_finish"
        return n
