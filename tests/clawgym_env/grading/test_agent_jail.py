"""The graders' agent-code jail (``clawgym_env.grading._agent_jail``) in real sealed sandboxes: what the
code it runs can and cannot do. Each check runs the jail's command line (as a script verifier does)
inside a sealed sandbox that holds a secret where hidden files go."""

from __future__ import annotations

import json
from pathlib import Path

from clawgym_env.sandbox import Mount, SandboxConfig, create_sandbox
from tests.clawgym_env.sandbox.conftest import backend  # noqa: F401  (bwrap; docker under its marker)

JAIL = Path(__file__).resolve().parents[3] / "clawgym_env" / "grading" / "_agent_jail.py"

PROBE = """
set -u
out=$(mktemp -d)
echo x > "$out/keep"
run() { python3 -I /tmp/jail/agent_jail.py "$@"; }
echo "hidden: $(run --cwd /workspace -- cat /verifier/secret.txt 2>&1 | head -c 80)"
echo "ws-write: $(run --cwd /workspace -- sh -c 'echo y > /workspace/new && echo wrote' 2>&1 | tail -n 1)"
echo "scratch: $(run --cwd "$out" --writable "$out" -- sh -c 'rm keep && echo z > made && ls' 2>&1 | tr '\\n' ' ')"
echo "after: $(ls "$out" | tr '\\n' ' ')"
run --cwd /workspace -- sh -c 'exit 7'; echo "rc: $?"
run --cwd /workspace --timeout 1 -- sleep 30; echo "timeout-rc: $?"
n=30; n="${n}1"
run --cwd /workspace -- sh -c "setsid sleep $n >/dev/null 2>&1 < /dev/null & echo started"
echo "survivors: $(python3 -c 'import glob
def cmd(p):
    try:
        return open(p, "rb").read()
    except OSError:
        return b""
print(sum(cmd(p) == b"sleep\\x00301\\x00" for p in glob.glob("/proc/[0-9]*/cmdline")))')"
echo "grader-fds: $(run --cwd /workspace -- sh -c 'echo FORGED > /proc/'$$'/fd/1' 2>&1 | tr '\n' ' ')"
"""


async def test_jailed_code_sees_the_workspace_read_only_and_nothing_hidden(backend: str, tmp_path: Path) -> None:
    hidden, ws = tmp_path / "hidden", tmp_path / "ws"
    hidden.mkdir()
    ws.mkdir()
    (hidden / "secret.txt").write_text("the expected answers\n")
    (ws / "input.txt").write_text("data\n")
    cfg = SandboxConfig(workspace_src=ws, mounts=(Mount(hidden, "/verifier"),), sealed=True)
    async with create_sandbox(backend, cfg) as sb:
        await sb.upload(JAIL, "/tmp/jail/agent_jail.py")
        jail = await sb.exec(["sh", "-c", 'echo "$CLAWGYM_JAIL"'])
        assert json.loads(jail.stdout)["hide"] == ["/verifier"]
        res = await sb.exec(["bash", "-c", PROBE], timeout=120)
    lines = dict(ln.split(": ", 1) for ln in res.stdout.splitlines() if ": " in ln)
    assert "the expected answers" not in res.stdout, res.stdout
    assert "No such file" in lines["hidden"] or "Permission denied" in lines["hidden"], lines
    assert lines["ws-write"] != "wrote", lines  # read-only (bwrap) / not its files (docker)
    assert lines["scratch"].split() == ["made"], lines  # a writable folder it may change
    assert lines["after"].split() == ["made"], lines  # ... and the grader sees the change
    assert lines["rc"] == "7" and lines["timeout-rc"] == "124", lines
    assert lines["survivors"] == "0", lines  # every process it left is gone when it returns
    assert "Permission denied" in lines["grader-fds"] and "FORGED" not in res.stdout, lines


def test_a_jail_that_cannot_run_refuses_instead_of_running_unjailed(monkeypatch) -> None:
    """Where a bwrap cannot nest (the probe says why), graders that run agent code fail loudly."""
    import importlib.util

    import pytest

    spec = importlib.util.spec_from_file_location("agent_jail_under_test", JAIL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    monkeypatch.setenv("CLAWGYM_JAIL", json.dumps({"kind": "unavailable", "why": "no nested bwrap here: test"}))
    with pytest.raises(RuntimeError, match="cannot run the agent's code safely: no nested bwrap"):
        mod.run_agent(["true"], "/")
