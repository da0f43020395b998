"""Adapters: environment, command line and config files point each CLI at the proxy, nothing else."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from clawgym_env.errors import ConfigError, HarnessInstallError
from clawgym_env.harness import HarnessSession
from harnesses.claude_code import ClaudeCode
from harnesses.codex import Codex
from harnesses.custom import CustomLoop
from harnesses.gemini_cli import GeminiCli
from harnesses.mini_swe_agent import MiniSweAgent
from harnesses.openclaw import OpenClaw
from harnesses.opencode import OpenCode
from harnesses.pi import Pi
from harnesses.qwen_code import QwenCode

SESSION = HarnessSession(
    session_id="s1", base_url="http://127.0.0.1:8787", api_key="sk-clawgym-abc", model="policy", workspace="/workspace", home="/tmp/home"
)


def test_claude_code_env_and_command() -> None:
    h = ClaudeCode()
    env = h.build_env(SESSION)
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8787"
    assert "sk-clawgym-abc" not in json.dumps(env)  # the key reaches Claude Code through its apiKeyHelper, once
    assert env["ANTHROPIC_MODEL"] == "policy"
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert env["IS_SANDBOX"] == "1"  # root inside: needed for --dangerously-skip-permissions
    assert env["HOME"] == "/tmp/home"
    cmd = h.build_command("do it", SESSION)
    assert cmd[0].endswith("/bin/claude.exe") and cmd[1:3] == ["-p", "do it"]
    assert "--dangerously-skip-permissions" in cmd and cmd[cmd.index("--output-format") + 1] == "stream-json"
    configs = h.write_configs(SESSION)
    assert set(configs) == {"/tmp/home/.claude/settings.json", "/tmp/home/.clawgym/key"}
    assert configs["/tmp/home/.clawgym/key"] == "sk-clawgym-abc"
    assert json.loads(configs["/tmp/home/.claude/settings.json"]) == {
        "apiKeyHelper": 'k=$(cat /tmp/home/.clawgym/key) && rm -f /tmp/home/.clawgym/key && printf %s "$k"'
    }
    assert h.dialect == "anthropic"


def test_every_adapter_declares_what_the_core_reads(tmp_path: Path) -> None:
    """What an episode reads from an adapter (its memory floor, where its own record lies) and what a check of the
    capture reads (its own count of model calls) is declared on Harness, with one signature for every adapter."""
    from clawgym_env.harness import STDOUT_LOG
    from clawgym_env.harness_registry import harness_names, load_harness

    for name in harness_names():
        h = load_harness(name)
        assert isinstance(h.memory_mb, int) and h.memory_mb >= 0, name
        own = h.own_record(tmp_path)
        assert (own is None) == (h.transcript is None), name
        if h.transcript == "stdout":
            assert own == tmp_path / STDOUT_LOG, name
        elif own is not None:  # a HOME path, kept without its leading dot inside the record folder
            assert tmp_path in own.parents and not own.relative_to(tmp_path).as_posix().startswith("."), name
        assert h.count_calls(tmp_path / "no-record") in (0, None), name  # an episode that left nothing counts none


def test_claude_code_counts_distinct_assistant_messages(tmp_path: Path) -> None:
    lines = [
        {"type": "system", "subtype": "init"},
        {"type": "assistant", "message": {"id": "msg_a", "content": [{"type": "text"}]}},
        {"type": "assistant", "message": {"id": "msg_a", "content": [{"type": "tool_use"}]}},  # same call, 2nd block
        {"type": "user", "message": {"content": []}},
        {"type": "assistant", "message": {"id": "msg_b"}},
        {"type": "result", "num_turns": 2},
    ]
    (tmp_path / "stdout.log").write_text("\n".join(json.dumps(x) for x in lines) + "\nnot json\n")
    assert ClaudeCode().count_calls(tmp_path) == 2


@pytest.mark.parametrize(
    ("api", "dialect", "base"),
    [
        ("openai-completions", "openai-chat", "http://127.0.0.1:8787/v1"),
        ("openai-responses", "openai-responses", "http://127.0.0.1:8787/v1"),
        ("anthropic-messages", "anthropic", "http://127.0.0.1:8787"),
    ],
)
def test_openclaw_config_names_only_the_proxy(api: str, dialect: str, base: str) -> None:
    h = OpenClaw(api=api)
    assert h.dialect == dialect
    files = h.write_configs(SESSION)
    config = json.loads(files["/tmp/home/.openclaw-exec.json"])
    assert config["models"]["mode"] == "replace"  # no ambient providers
    (provider,) = config["models"]["providers"].values()
    assert provider == {**provider, "baseUrl": base, "apiKey": "sk-clawgym-abc", "api": api}
    assert config["agents"]["defaults"]["model"]["primary"] == "clawgym/policy"
    cmd = h.build_command("task text", SESSION)
    assert cmd[2:5] == ["agent", "exec", "task text"]
    for flag, value in (
        ("--config", "/tmp/home/.openclaw-exec.json"),
        ("--cwd", "/workspace"),
        ("--model", "clawgym/policy"),
        ("--state-dir", "/tmp/home/.openclaw-state"),
    ):
        assert cmd[cmd.index(flag) + 1] == value
    assert "--json" in cmd
    assert "/tmp/home/.openclaw-state/.keep" in files  # --state-dir must exist before the run
    assert h.build_env(SESSION)["PATH"].startswith("/opt/clawgym/node/bin:")


def test_openclaw_rejects_unknown_api() -> None:
    with pytest.raises(ConfigError, match="openai-completions"):
        OpenClaw(api="gemini")


def test_openclaw_counts_assistant_messages_in_its_sqlite(tmp_path: Path) -> None:
    db = tmp_path / "openclaw-state" / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
    db.parent.mkdir(parents=True)
    con = sqlite3.connect(db)
    con.execute("create table transcript_events (session_id text, seq int, event_json text)")
    events = [
        {"type": "session"},
        {"type": "message", "message": {"role": "user"}},
        {"type": "message", "message": {"role": "assistant"}},
        {"type": "message", "message": {"role": "toolResult"}},
        {"type": "message", "message": {"role": "assistant"}},
    ]
    con.executemany("insert into transcript_events values ('s', ?, ?)", [(i, json.dumps(e)) for i, e in enumerate(events)])
    con.commit()
    con.close()
    (tmp_path / "openclaw-state" / "state.sqlite").write_bytes(b"")  # an unrelated empty database is ignored
    assert OpenClaw().count_calls(tmp_path) == 2


def test_custom_loop_command_and_mounts(tmp_path: Path) -> None:
    h = CustomLoop(max_turns=7)
    cmd = h.build_command("task", SESSION)
    assert cmd[1:4] == ["-I", "-S", "/opt/clawgym/custom/agent.py"]
    assert cmd[cmd.index("--max-turns") + 1] == "7"
    assert cmd[cmd.index("--base-url") + 1] == "http://127.0.0.1:8787"
    assert h.build_env(SESSION)["OPENAI_API_KEY"] == "sk-clawgym-abc"
    (script_mount, *_) = h.mounts(Path("/nonexistent"))
    assert (script_mount.host / "agent.py").is_file() and not script_mount.writable
    (tmp_path / "custom-transcript.jsonl").write_text('{"role": "user"}\n{"role": "assistant"}\n{"role": "tool"}\n{"role": "assistant"}\n')
    assert h.count_calls(tmp_path) == 2


def test_agent_script_is_stdlib_only() -> None:
    import ast

    import harnesses.custom as pkg

    tree = ast.parse((Path(pkg.__file__).parent / "agent.py").read_text())
    mods = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    mods |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    import sys

    assert mods <= set(sys.stdlib_module_names), mods - set(sys.stdlib_module_names)


@pytest.mark.parametrize("cls", [ClaudeCode, OpenClaw, Codex, GeminiCli, QwenCode, OpenCode, Pi, MiniSweAgent])
def test_npm_harness_mounts_fail_clearly_when_not_installed(cls: type, tmp_path: Path) -> None:
    with pytest.raises(HarnessInstallError, match="clawgym harness install"):
        cls().mounts(tmp_path)


def test_openclaw_uses_a_warm_compile_cache_only_read_only(tmp_path: Path) -> None:
    from clawgym_env.harness_install import NODE_PACKAGE, NODE_VERSION, installed_root
    from harnesses import _compile_cache

    for pkg, ver in (("openclaw", OpenClaw.version), (NODE_PACKAGE, NODE_VERSION)):  # pretend both are installed
        root = installed_root(pkg, ver, tmp_path)
        root.mkdir(parents=True)
        (root / ".clawgym-installed.json").write_text("{}")
    package_json = installed_root("openclaw", OpenClaw.version, tmp_path) / "node_modules" / "openclaw" / "package.json"
    package_json.parent.mkdir(parents=True)
    package_json.write_text('{"version": "x"}')
    h = OpenClaw()
    assert len(h.mounts(tmp_path)) == 3  # install, Node, the clock/UUID pin (harnesses/node_pin)
    env = h.build_env(SESSION)
    assert env["NODE_DISABLE_COMPILE_CACHE"] == "1" and "NODE_COMPILE_CACHE" not in env
    warm = _compile_cache.cache_dir_for(h, tmp_path)
    warm.mkdir()
    (warm / ".clawgym-warm.json").write_text("{}")
    cache_mount = h.mounts(tmp_path)[-1]
    assert cache_mount.host == warm and not cache_mount.writable
    env = h.build_env(SESSION)
    # OpenClaw's own cache folder under the mount, marked as its respawned child: it runs in one Node process
    st = package_json.stat()
    assert env["NODE_COMPILE_CACHE"] == (f"{cache_mount.inside}/openclaw/{OpenClaw.version}/{st.st_mtime_ns // 1_000_000}-{st.st_size}")
    assert env["OPENCLAW_PACKAGED_COMPILE_CACHE_RESPAWNED"] == "1" and "NODE_DISABLE_COMPILE_CACHE" not in env


def test_codex_config_has_only_the_proxy_as_provider() -> None:
    import tomllib

    h = Codex()
    files = h.write_configs(SESSION)
    config = tomllib.loads(files["/tmp/home/.codex/config.toml"])
    assert config["model_provider"] == "clawgym" and config["model"] == "policy"
    assert config["model_providers"] == {
        "clawgym": {
            "name": "ClawGym proxy",
            "base_url": "http://127.0.0.1:8787/v1",
            "env_key": "CLAWGYM_API_KEY",
            "wire_api": "responses",
            "request_max_retries": 0,
            "stream_max_retries": 0,
            "stream_idle_timeout_ms": 600000,
        }
    }
    assert config["check_for_update_on_startup"] is False and config["analytics"] == {"enabled": False}
    assert config["features"]["plugins"] is False and config["web_search"] == "disabled"
    env = h.build_env(SESSION)
    assert env["CLAWGYM_API_KEY"] == "sk-clawgym-abc" and env["CODEX_HOME"] == "/tmp/home/.codex"
    cmd = h.build_command("do it", SESSION)
    assert cmd[0].endswith("/bin/codex") and cmd[1] == "exec" and cmd[-1] == "do it"
    assert "--dangerously-bypass-approvals-and-sandbox" in cmd and cmd[cmd.index("--cd") + 1] == "/workspace"


def test_codex_counts_its_own_token_count_events(tmp_path: Path) -> None:
    day = tmp_path / "codex" / "sessions" / "2026" / "12" / "01"
    day.mkdir(parents=True)
    events = [
        {"type": "session_meta", "payload": {}},
        {"type": "event_msg", "payload": {"type": "token_count", "info": None}},  # rate-limit only: no call
        {"type": "event_msg", "payload": {"type": "token_count", "info": {"total_token_usage": {}}}},
        {"type": "response_item", "payload": {"type": "message"}},
        {"type": "event_msg", "payload": {"type": "token_count", "info": {"total_token_usage": {}}}},
    ]
    (day / "rollout-x.jsonl").write_text("\n".join(json.dumps(e) for e in events) + "\nnot json\n")
    assert Codex().count_calls(tmp_path) == 2


def test_gemini_cli_env_points_at_the_proxy_and_settings_switch_off_phoning_home() -> None:
    h = GeminiCli()
    env = h.build_env(SESSION)
    assert env["GOOGLE_GEMINI_BASE_URL"] == "http://127.0.0.1:8787" and env["GEMINI_API_KEY"] == "sk-clawgym-abc"
    settings = json.loads(h.write_configs(SESSION)["/tmp/home/.gemini/settings.json"])
    assert settings["privacy"]["usageStatisticsEnabled"] is False and settings["telemetry"]["enabled"] is False
    assert settings["general"]["enableAutoUpdate"] is False
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    cmd = h.build_command("task", SESSION)
    assert cmd[2:4] == ["-p", "task"] and "--yolo" in cmd and cmd[cmd.index("--output-format") + 1] == "json"
    assert h.dialect == "gemini"


def test_gemini_cli_counts_requests_in_its_json_envelope(tmp_path: Path) -> None:
    out = "YOLO mode is enabled.\n" + json.dumps(
        {"response": "done", "stats": {"models": {"policy": {"api": {"totalRequests": 3}}, "flash": {"api": {"totalRequests": 1}}}}}
    )
    (tmp_path / "stdout.log").write_text(out)
    assert GeminiCli().count_calls(tmp_path) == 4
    assert GeminiCli().count_calls(tmp_path / "none") == 0


def test_qwen_code_reaches_only_the_proxy_and_counts_its_result_stats(tmp_path: Path) -> None:
    h = QwenCode()
    env = h.build_env(SESSION)
    assert env["OPENAI_BASE_URL"] == "http://127.0.0.1:8787/v1" and env["OPENAI_API_KEY"] == "sk-clawgym-abc"
    settings = json.loads(h.write_configs(SESSION)["/tmp/home/.qwen/settings.json"])
    assert settings["privacy"]["usageStatisticsEnabled"] is False and settings["telemetry"]["enabled"] is False
    cmd = h.build_command("task", SESSION)
    assert cmd[cmd.index("--auth-type") + 1] == "openai" and "--yolo" in cmd
    events = [{"type": "system"}, {"type": "assistant"}, {"type": "result", "stats": {"models": {"policy": {"api": {"totalRequests": 2}}}}}]
    (tmp_path / "stdout.log").write_text(json.dumps(events))
    assert h.count_calls(tmp_path) == 2 and h.count_calls(tmp_path / "none") == 0


def test_opencode_config_names_only_the_proxy_and_disables_phoning_home(tmp_path: Path) -> None:
    h = OpenCode()
    config = json.loads(h.write_configs(SESSION)["/tmp/home/.opencode-clawgym.json"])
    ((name, provider),) = config["provider"].items()
    assert config["enabled_providers"] == [name] and config["model"] == f"{name}/policy"
    assert provider["options"]["baseURL"] == "http://127.0.0.1:8787/v1" and provider["npm"] == "@ai-sdk/openai-compatible"
    assert config["autoupdate"] is False and config["share"] == "disabled"
    env = h.build_env(SESSION)
    assert env["OPENCODE_CONFIG"] == "/tmp/home/.opencode-clawgym.json" and env["CLAWGYM_API_KEY"] == "sk-clawgym-abc"
    for flag in ("OPENCODE_DISABLE_MODELS_FETCH", "OPENCODE_DISABLE_AUTOUPDATE", "OPENCODE_DISABLE_DEFAULT_PLUGINS"):
        assert env[flag] == "1"
    assert env["npm_config_offline"] == "true"
    out = "\n".join(json.dumps({"type": t}) for t in ("step_start", "tool_use", "step_finish", "step_start", "text", "step_finish"))
    (tmp_path / "stdout.log").write_text(out + "\nnoise\n")
    assert h.count_calls(tmp_path) == 2


def test_opencode_gets_the_cached_ripgrep_first_on_path(tmp_path: Path) -> None:
    """OpenCode downloads ripgrep from GitHub when no ``rg`` is on PATH; the adapter mounts the one it installed
    from PyPI and puts it first, and refuses to start (naming the fix) while that is missing."""
    from clawgym_env.harness_install import installed_root
    from harnesses.opencode import RIPGREP, RIPGREP_INSIDE

    npm_root = installed_root("opencode-ai", OpenCode.version, tmp_path)
    npm_root.mkdir(parents=True)
    (npm_root / ".clawgym-installed.json").write_text("{}")
    with pytest.raises(HarnessInstallError, match="ripgrep .*clawgym harness install opencode"):
        OpenCode().mounts(tmp_path)
    rg_root = installed_root(*RIPGREP, tmp_path)
    (rg_root / "bin").mkdir(parents=True)
    (rg_root / ".clawgym-installed.json").write_text("{}")
    mounts = OpenCode().mounts(tmp_path)
    assert {(m.host, m.inside, m.writable) for m in mounts} >= {(rg_root / "bin", f"{RIPGREP_INSIDE}/bin", False)}
    assert OpenCode().build_env(SESSION)["PATH"].split(":")[0] == f"{RIPGREP_INSIDE}/bin"


def test_pi_models_file_names_only_the_proxy_and_runs_offline(tmp_path: Path) -> None:
    h = Pi()
    files = h.write_configs(SESSION)
    models = json.loads(files["/tmp/home/.pi/agent/models.json"])
    (provider,) = models["providers"].values()
    assert provider["baseUrl"] == "http://127.0.0.1:8787/v1" and provider["apiKey"] == "sk-clawgym-abc"
    assert json.loads(files["/tmp/home/.pi/agent/settings.json"])["enableInstallTelemetry"] is False
    assert h.build_env(SESSION)["PI_OFFLINE"] == "1" and "--offline" in h.build_command("t", SESSION)
    events = [
        {"type": "message_end", "message": {"role": "user"}},
        {"type": "message_end", "message": {"role": "assistant"}},
        {"type": "message_end", "message": {"role": "toolResult"}},
        {"type": "message_end", "message": {"role": "assistant"}},
    ]
    (tmp_path / "stdout.log").write_text("\n".join(json.dumps(e) for e in events))
    assert h.count_calls(tmp_path) == 2


def test_mini_swe_agent_runs_from_its_venv_against_the_proxy(tmp_path: Path) -> None:
    h = MiniSweAgent()
    env = h.build_env(SESSION)
    assert env["OPENAI_API_BASE"] == "http://127.0.0.1:8787/v1" and env["OPENAI_API_KEY"] == "sk-clawgym-abc"
    assert env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"  # no price-map fetch from GitHub
    cmd = h.build_command("task", SESSION)
    assert cmd[0] == "/opt/clawgym/mini-swe-agent/venv/bin/python" and cmd[1:3] == ["-m", "minisweagent.run.mini"]
    assert cmd[cmd.index("-m", 3) + 1] == "openai/policy" and "-y" in cmd and "--exit-immediately" in cmd
    traj = tmp_path / "mini-swe-agent" / "trajectory.json"
    traj.parent.mkdir()
    traj.write_text(json.dumps({"info": {"model_stats": {"api_calls": 3}}, "messages": []}))
    assert h.count_calls(tmp_path) == 3 and h.count_calls(tmp_path / "none") == 0


def test_openclaw_is_pinned_by_default_and_can_run_unpinned(tmp_path: Path) -> None:
    from clawgym_env.harness_install import NODE_PACKAGE, NODE_VERSION, installed_root
    from harnesses.npm import PIN_INSIDE

    for pkg, ver in (("openclaw", OpenClaw.version), (NODE_PACKAGE, NODE_VERSION)):
        root = installed_root(pkg, ver, tmp_path)
        root.mkdir(parents=True)
        (root / ".clawgym-installed.json").write_text("{}")
    pinned, free = OpenClaw(), OpenClaw(pinned=False)
    pin = next(m for m in pinned.mounts(tmp_path) if m.inside == PIN_INSIDE)
    assert (pin.host / "pin.cjs").is_file() and not pin.writable
    assert pinned.build_env(SESSION)["NODE_OPTIONS"] == f"--require={PIN_INSIDE}/pin.cjs"
    assert all(m.inside != PIN_INSIDE for m in free.mounts(tmp_path)) and "NODE_OPTIONS" not in free.build_env(SESSION)
