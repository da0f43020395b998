"""Our own minimal agent loop as a harness: the reference for writing an adapter.

An adapter is one small class: where the harness lives (``install``/``mounts``), how it finds the
proxy (``build_env``/``write_configs``) and how to launch one headless episode (``build_command``).
The loop itself is ``agent.py`` next to this file: stdlib-only, run by the sandbox's own python3 (the
same one verifiers get; the host interpreter is never visible inside), speaking OpenAI Chat Completions with tools bash/read/write/edit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from clawgym_env.harness import Harness, HarnessSession
from clawgym_env.sandbox.base import Mount
from harnesses.npm import SANDBOX_PATH

__all__ = ["CustomLoop"]

HERE = Path(__file__).resolve().parent
INSIDE = "/opt/clawgym/custom"


class CustomLoop(Harness):
    """The stdlib agent loop in ``agent.py``; nothing to install, the sandbox's python3 runs it."""

    name: ClassVar[str] = "custom"
    version: ClassVar[str] = "0.1.0"
    dialect: ClassVar[str] = "openai-chat"
    memory_mb: ClassVar[int] = 512
    """Sandbox memory floor (MB) this harness needs, whatever the task asks."""
    transcript: ClassVar[str] = ".custom-transcript.jsonl"
    """Where the harness's own transcript is (relative to HOME): one JSON message per line."""

    def __init__(self, max_turns: int = 30, max_tokens: int = 1024) -> None:
        self.max_turns = max_turns
        self.max_tokens = max_tokens

    def install(self, cache_dir: Path) -> Path:
        return HERE

    def mounts(self, cache_dir: Path) -> tuple[Mount, ...]:
        return (Mount(host=HERE, inside=INSIDE),)

    def build_env(self, session: HarnessSession) -> Mapping[str, str]:
        return {
            "OPENAI_API_KEY": session.api_key,
            "HOME": session.home,
            "PATH": SANDBOX_PATH,
            "LANG": "C.UTF-8",
            "TZ": "UTC",
            "PYTHONDONTWRITEBYTECODE": "1",
        }

    def build_command(self, instruction: str, session: HarnessSession) -> list[str]:
        turns = session.max_turns or self.max_turns
        return [
            "python3",
            "-I",
            "-S",
            f"{INSIDE}/agent.py",
            instruction,
            "--base-url",
            session.base_url,
            "--model",
            session.model,
            "--cwd",
            session.workspace,
            "--max-turns",
            str(turns),
            "--max-tokens",
            str(self.max_tokens),
            "--transcript",
            f"{session.home}/{self.transcript}",
        ]

    def write_configs(self, session: HarnessSession) -> dict[str, str]:
        return {f"{session.home}/{self.transcript}": ""}

    def count_calls(self, record: Path) -> int:
        """Model calls in the loop's transcript: one per assistant message."""
        lines = self.read_own_record(record).splitlines()
        return sum(1 for line in lines if line.strip() and json.loads(line).get("role") == "assistant")
