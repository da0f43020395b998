"""bench/harness.py's per-harness pieces: a scripted write for every registered harness, and a native command line
and environment that name host paths only (the bench's figures themselves are never asserted)."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from clawgym_env.harness import HarnessSession
from clawgym_env.harness_registry import HARNESSES, load_harness

from .conftest import require_installed

BENCH = Path(__file__).resolve().parents[2] / "bench" / "harness.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("clawgym_bench_harness", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", sorted(HARNESSES))
def test_every_registered_harness_has_one_scripted_write(bench: ModuleType, name: str) -> None:
    """A harness added to the registry without a scripted write in the bench fails here, not silently later."""
    assert (name in bench.WRITE) != (name in bench.SHELL_WRITE), f"{name}: name its write tool in WRITE or its shell in SHELL_WRITE"
    tool = (bench.WRITE.get(name) or bench.SHELL_WRITE[name])[0]
    replies = bench.backend(name, "/ws")._replies
    first = replies[0]["tool_calls"][0]
    assert first["name"] == tool
    written = "\n".join(str(v) for v in first["arguments"].values())
    assert "hello.txt" in written and "hello world" in written
    if name in bench.SUBMIT:  # its final turn runs the command it ends on, with the same shell
        assert replies[1]["tool_calls"] == [{"name": tool, "arguments": {bench.SHELL_WRITE[name][1]: bench.SUBMIT[name]}}]
    else:
        assert replies[1] == "Done."


def test_unknown_harness_names_the_table_to_fill(bench: ModuleType) -> None:
    with pytest.raises(SystemExit, match="WRITE"):
        bench.backend("not-a-harness")


@pytest.mark.parametrize("name", sorted(HARNESSES))
def test_native_invocation_names_host_paths_and_the_egress_proxy(bench: ModuleType, name: str, tmp_path: Path) -> None:
    require_installed(name)
    adapter = load_harness(name)
    hs = HarnessSession(
        session_id="s1",
        base_url="http://127.0.0.1:4321",
        api_key="sk-clawgym-abc",
        model="policy",
        workspace=str(tmp_path / "ws"),
        home=str(tmp_path / "home"),
    )
    cmd, env = bench.native_invocation(adapter, hs, "egress-xyz", 4321, tmp_path / "compile-cache")
    assert shutil.which(cmd[0], path=env["PATH"]), cmd[0]  # the host's copy of the binary the sandbox runs
    # every sandbox mount point is mapped to its host folder; only the sandbox-only PATH entry is left
    left = {m for v in [*cmd, *env.values()] for m in re.findall(r"/opt/clawgym/[^:=\s]*", v)}
    assert left <= {"/opt/clawgym/bin"}, left
    scripts = [a for a in cmd[1:3] if a.endswith((".js", ".mjs", ".py"))]
    assert all(Path(a).is_file() for a in scripts), scripts
    # the egress key, as an episode's: the model key is never in a variable every process of the sandbox sees
    assert env["HTTPS_PROXY"] == "http://clawgym:egress-xyz@127.0.0.1:4321" and env["NODE_USE_ENV_PROXY"] == "1"
    assert "sk-clawgym-abc" not in "".join(v for k, v in env.items() if "PROXY" in k)
    assert "127.0.0.1" in env["NO_PROXY"].split(",")
    assert env["PATH"].endswith(":" + os.environ["PATH"])
    if "NODE_COMPILE_CACHE" in env:  # OpenClaw: natively a private cache, never the shared read-only one
        assert env["NODE_COMPILE_CACHE"].startswith(str(tmp_path / "compile-cache"))
