"""Claude Code (``@anthropic-ai/claude-code``), unmodified, run headless against the proxy.

Measured (docs/design.md, "Harnesses, measured"): a native binary (~384 MB, shipped in the npm package's bin/claude.exe);
it only calls ``POST /v1/messages?beta=true`` with streaming; as root it refuses
``--dangerously-skip-permissions`` unless ``IS_SANDBOX=1``. Its own transcript is the
``stream-json`` stdout, which the episode runner keeps next to the capture.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from clawgym_env.errors import ConfigError
from clawgym_env.harness import HarnessSession
from harnesses.npm import SANDBOX_PATH, NpmCli

__all__ = ["ClaudeCode", "ClaudeCodeBash"]

PACKAGE = "@anthropic-ai/claude-code"
INSIDE = "/opt/clawgym/claude-code"
KEY_TTL_MS = 86_400_000
"""How long Claude Code keeps the key its apiKeyHelper gave (longer than any episode: the helper works once)."""


class ClaudeCode(NpmCli):
    """Claude Code in print mode (``-p``) with ``stream-json`` output and permissions skipped."""

    name: ClassVar[str] = "claude-code"
    version: ClassVar[str] = "2.1.332"
    dialect: ClassVar[str] = "anthropic"
    memory_mb: ClassVar[int] = 1024
    """Sandbox memory floor (MB) this harness needs, whatever the task asks."""
    transcript: ClassVar[str] = "stdout"
    """Where the harness's own transcript is: its stream-json stdout."""
    package: ClassVar[str] = PACKAGE
    inside: ClassVar[str] = INSIDE
    entry: ClassVar[str] = f"node_modules/{PACKAGE}/bin/claude.exe"
    """The native binary the package ships (npm runs on Node 24: the package declares node >= 22)."""
    on_node: ClassVar[bool] = False
    tools: ClassVar[tuple[str, ...] | None] = None
    """Built-in tools offered to the model (``--tools``); None keeps Claude Code's default set."""

    def __init__(self, auto_compact_window: int | None = None, auto_compact_pct: float | None = None) -> None:
        """Claude Code's own auto-compaction settings (env vars of the pinned version), unset by default.

        ``auto_compact_window``: the context size it compacts against (``CLAUDE_CODE_AUTO_COMPACT_WINDOW``, at least
        100,000; without it an unknown model such as ``policy`` gets 1,000,000). ``auto_compact_pct``: compact once the
        conversation passes this percent of it (``CLAUDE_AUTOCOMPACT_PCT_OVERRIDE``). What it then sends is in
        docs/trees.md. ``/compact`` would need a second user turn, which a one-shot ``-p`` episode does not have."""
        if auto_compact_window is not None and auto_compact_window < 100_000:
            raise ConfigError(
                f"claude-code auto_compact_window={auto_compact_window}: Claude Code {self.version} treats "
                "anything below 100000 as 100000; set 100000 or more and lower auto_compact_pct instead"
            )
        if auto_compact_pct is not None and not 0 < auto_compact_pct <= 100:
            raise ConfigError(f"claude-code auto_compact_pct={auto_compact_pct}: give a percent in (0, 100]")
        self.auto_compact_window = auto_compact_window
        self.auto_compact_pct = auto_compact_pct

    def build_env(self, session: HarnessSession) -> Mapping[str, str]:
        compaction = {}
        if self.auto_compact_window is not None:
            compaction["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] = str(self.auto_compact_window)
        if self.auto_compact_pct is not None:
            compaction["CLAUDE_AUTOCOMPACT_PCT_OVERRIDE"] = f"{self.auto_compact_pct:g}"
        return {
            **compaction,
            "ANTHROPIC_BASE_URL": session.base_url,
            # the key comes from apiKeyHelper (write_configs), once: not in the environment its tools inherit
            "CLAUDE_CODE_API_KEY_HELPER_TTL_MS": str(KEY_TTL_MS),
            "ANTHROPIC_MODEL": session.model,
            "ANTHROPIC_SMALL_FAST_MODEL": session.model,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            # documented opt-out of the first system line "x-anthropic-billing-header: cc_version=2.1.332.<fp>":
            # <fp> hashes characters of the task's prompt, so at token ~25 every task's prompt differed and
            # no two tasks shared Claude Code's ~2.9k-token system prompt (prefix KV reuse, tree packs)
            "CLAUDE_CODE_ATTRIBUTION_HEADER": "0",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "IS_SANDBOX": "1",
            "HOME": session.home,
            "PATH": SANDBOX_PATH,
            "TERM": "dumb",
            "LANG": "C.UTF-8",
            "TZ": "UTC",
        }

    def build_command(self, instruction: str, session: HarnessSession) -> list[str]:
        cmd = self.cli(
            "-p", instruction, "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions", "--model", session.model
        )
        if self.tools is not None:
            cmd += ["--tools", ",".join(self.tools)]
        if session.max_turns is not None:
            cmd += ["--max-turns", str(session.max_turns)]
        return cmd

    def write_configs(self, session: HarnessSession) -> dict[str, str]:
        """A fixed settings file (HOME exists, no ambient settings leak into prompts) whose ``apiKeyHelper`` reads
        the episode's key from a file and deletes it. Claude Code runs the helper once, at start-up, before its
        first model call, so no command of the agent (which runs only after a model call) finds the key in a file
        or in the environment. It stays in Claude Code's memory (docs/trees.md: what remains possible)."""
        key = f"{session.home}/.clawgym/key"
        helper = f'k=$(cat {key}) && rm -f {key} && printf %s "$k"'
        return {f"{session.home}/.claude/settings.json": json.dumps({"apiKeyHelper": helper}) + "\n", key: session.api_key}

    def count_calls(self, record: Path) -> int:
        """Model calls seen in its stream-json stdout: distinct assistant message ids."""
        ids: set[str] = set()
        for line in self.read_own_record(record).splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("type") == "assistant":
                ids.add(str(event.get("message", {}).get("id")))
        return len(ids)


class ClaudeCodeBash(ClaudeCode):
    """The same Claude Code with only its Bash tool (``--tools Bash``).

    Why: the default tool set makes the first prompt ~12.3k tokens, past small models' context
    (SmolLM2: 8,192) and slow to prefill on CPU; with Bash alone it is a few thousand. Still the
    unmodified binary: only a documented flag differs, and results name this profile apart.
    """

    name: ClassVar[str] = "claude-code-bash"
    tools: ClassVar[tuple[str, ...] | None] = ("Bash",)
