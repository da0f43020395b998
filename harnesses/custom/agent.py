#!/usr/bin/env python3
"""A minimal agent loop: OpenAI Chat Completions with four tools (bash, read, write, edit).

Standalone on purpose: stdlib only, one file, run inside the sandbox by whatever python is there.
It is the reference harness for people writing their own adapter: the proxy sees ordinary Chat
calls, and the episode's transcript is what this script appends to ``--transcript``.

Exit codes: 0 the model answered without tool calls; 3 max turns reached; 4 the API failed.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

SYSTEM = (
    "You are a careful software agent working in the directory {cwd}. Use the tools to inspect and "
    "change files and run commands. When the task is done, reply with a short summary and no tool call."
)
MAX_OUTPUT = 16000


def _tool(name, description, properties, required):
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


TOOLS = [
    _tool(
        "bash", "Run a shell command in the working directory; returns exit code and output.", {"command": {"type": "string"}}, ["command"]
    ),
    _tool("read", "Read a text file.", {"path": {"type": "string"}}, ["path"]),
    _tool("write", "Create or overwrite a text file.", {"path": {"type": "string"}, "content": {"type": "string"}}, ["path", "content"]),
    _tool(
        "edit",
        "Replace one exact occurrence of old_text with new_text in a file.",
        {"path": {"type": "string"}, "old_text": {"type": "string"}, "new_text": {"type": "string"}},
        ["path", "old_text", "new_text"],
    ),
]


def run_tool(name, args, cwd):
    """Execute one tool call and return its text result (errors are results, not exceptions)."""
    try:
        if name == "bash":
            # Output goes to a file, not a pipe: a background job (`cmd &`) must not block the turn.
            with tempfile.TemporaryFile() as out:
                proc = subprocess.run(
                    args["command"],
                    shell=True,
                    cwd=cwd,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    timeout=120,
                    check=False,
                )
                out.seek(0)
                text = out.read().decode("utf-8", errors="replace")
            return f"exit code {proc.returncode}\n{text[-MAX_OUTPUT:]}"
        path = os.path.join(cwd, args["path"])
        if name == "read":
            with open(path, encoding="utf-8", errors="replace") as f:
                return f.read()[:MAX_OUTPUT]
        if name == "write":
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(args["content"])
            return f"wrote {len(args['content'])} characters to {args['path']}"
        if name == "edit":
            with open(path, encoding="utf-8") as f:
                text = f.read()
            if text.count(args["old_text"]) != 1:
                return f"error: old_text occurs {text.count(args['old_text'])} times in {args['path']}, expected once"
            with open(path, "w", encoding="utf-8") as f:
                f.write(text.replace(args["old_text"], args["new_text"]))
            return f"edited {args['path']}"
        return f"error: unknown tool {name}"
    except Exception as exc:  # noqa: BLE001 - a failing tool is reported to the model
        return f"error: {type(exc).__name__}: {exc}"


def chat(base_url, api_key, body):
    req = urllib.request.Request(
        base_url.rstrip("/") + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {api_key}"},
    )
    with urllib.request.urlopen(req, timeout=600) as resp:
        return json.loads(resp.read())


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("instruction")
    p.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8787"))
    p.add_argument("--model", default=os.environ.get("OPENAI_MODEL", "policy"))
    p.add_argument("--cwd", default=os.getcwd())
    p.add_argument("--max-turns", type=int, default=30)
    p.add_argument("--max-tokens", type=int, default=1024)
    p.add_argument("--transcript", default=None, help="append every message as one JSON line")
    a = p.parse_args(argv)
    api_key = os.environ.get("OPENAI_API_KEY", "")
    messages = [{"role": "system", "content": SYSTEM.format(cwd=a.cwd)}, {"role": "user", "content": a.instruction}]
    log = open(a.transcript, "a", encoding="utf-8") if a.transcript else None  # noqa: SIM115 - open for the whole run

    def record(msg):
        messages.append(msg)
        if log:
            log.write(json.dumps(msg) + "\n")
            log.flush()

    for m in messages:
        log and log.write(json.dumps(m) + "\n")
    for _turn in range(a.max_turns):
        body = {"model": a.model, "messages": messages, "tools": TOOLS, "max_tokens": a.max_tokens}
        try:
            reply = chat(a.base_url, api_key, body)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            detail = exc.read().decode(errors="replace")[:500] if isinstance(exc, urllib.error.HTTPError) else ""
            print(f"model call failed: {exc} {detail}", file=sys.stderr)
            return 4
        msg = reply["choices"][0]["message"]
        calls = msg.get("tool_calls") or []
        turn = (("role", "assistant"), ("content", msg.get("content") or ""), ("tool_calls", calls or None))
        record({k: v for k, v in turn if v is not None})
        if not calls:
            print(msg.get("content") or "")
            return 0
        for call in calls:
            fn = call.get("function", {})
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except ValueError as exc:
                result = f"error: arguments are not JSON: {exc}"
            else:
                result = run_tool(fn.get("name", ""), args, a.cwd)
            record({"role": "tool", "tool_call_id": call.get("id", ""), "content": result})
    print(f"stopped after {a.max_turns} turns", file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main())
