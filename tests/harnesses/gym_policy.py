"""A scripted policy for the Gym harness tests: reads the observation, answers with a tool call
or a final message, as a model would (no look at call indexes, so side calls are handled)."""

from __future__ import annotations

import json
from typing import Any

import shlex

WRITE_TOOLS = ("Write", "write", "write_file")
"""Write tools by name (Claude Code: Write; OpenClaw, custom, OpenCode, pi: write; Gemini CLI, Qwen Code:
write_file); the path argument is whichever of PATH_ARGS the tool's schema has."""
PATH_ARGS = ("file_path", "filePath", "path")
SHELL_TOOLS = {"exec_command": "cmd", "shell": "command", "bash": "command", "Bash": "command", "run_shell_command": "command"}
"""Shell-tool name -> its command argument, for harnesses whose only way to write is a shell (Codex,
claude-code-bash)."""
SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def write_action(obs: dict[str, Any], workspace: str, name: str, content: str) -> dict[str, Any]:
    """A structured turn calling the harness's own write tool (or, lacking one, its shell)."""
    tools = {t["function"]["name"]: t["function"] for t in json.loads(obs["tools"])}
    tool = next((t for t in WRITE_TOOLS if t in tools), None)
    if tool is not None:
        props = (tools[tool].get("parameters") or {}).get("properties") or {}
        arg = next(a for a in PATH_ARGS if a in props)
        path = name if arg == "path" else f"{workspace}/{name}"  # file_path/filePath: absolute
        return {"tool_calls": [{"name": tool, "arguments": {arg: path, "content": content}}]}
    shell = next((t for t in SHELL_TOOLS if t in tools), None)
    assert shell is not None, f"no write or shell tool among {sorted(tools)}"
    cmd = f"printf %s {shlex.quote(content)} > {shlex.quote(f'{workspace}/{name}')}"
    return {"tool_calls": [{"name": shell, "arguments": {SHELL_TOOLS[shell]: cmd}}]}


def files_written(obs: dict[str, Any]) -> int:
    """How many of this episode's write calls already came back as tool results."""
    return sum(1 for m in json.loads(obs["messages"]) if m.get("role") == "tool")


def hello_policy(obs: dict[str, Any], workspace: str = "/workspace") -> Any:
    """Write hello.txt once, then say done."""
    if not json.loads(obs["tools"]):
        return "ok"  # a side call without tools (e.g. a title request): plain text
    if files_written(obs) == 0:
        return write_action(obs, workspace, "hello.txt", "hello world\n")
    return finish(obs, "Done: hello.txt holds hello world.")


def finish(obs: dict[str, Any], text: str) -> Any:
    """The final turn: plain text, or the submit command when the harness asks for one (mini-swe-agent
    ends only when the model runs ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``)."""
    if SUBMIT in obs["messages"]:
        tools = {t["function"]["name"] for t in json.loads(obs["tools"])}
        shell = next(t for t in SHELL_TOOLS if t in tools)
        return {"text": text, "tool_calls": [{"name": shell, "arguments": {SHELL_TOOLS[shell]: f"echo {SUBMIT}"}}]}
    return text


def many_files_policy(obs: dict[str, Any], workspace: str = "/workspace") -> Any:
    """Write f01.txt..f20.txt one call each, then say done (21 calls)."""
    if not json.loads(obs["tools"]):
        return "ok"
    n = files_written(obs)
    if n < 20:
        return write_action(obs, workspace, f"f{n + 1:02d}.txt", f"file {n + 1:02d}\n")
    return finish(obs, "Done: wrote f01.txt to f20.txt.")
