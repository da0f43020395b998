"""A read-only, pre-warmed Node compile cache for OpenClaw (measured: ~15% less wall time per episode).

OpenClaw's launcher asks Node to cache compiled bytecode. In a throwaway sandbox that cache would
be rebuilt (34 MB, 5k files) by every episode and never reused, so episodes run with it disabled
unless a warm cache exists. ``warm`` builds one once, at install time, by running a single
headless turn in a sandbox against a scripted "done" policy (no agent, nothing task-specific);
episodes then bind it read-only, so no episode can write to what another one reads.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harnesses.openclaw import OpenClaw

__all__ = ["CACHE_INSIDE", "cache_env", "cache_dir_for", "is_warm", "warm"]

CACHE_INSIDE = "/opt/clawgym/openclaw-compile-cache"
_MARKER = ".clawgym-warm.json"
_log = logging.getLogger("clawgym.harness_install")


def cache_dir_for(harness: OpenClaw, cache_dir: Path) -> Path:
    """Host folder of the warm cache, next to the OpenClaw install."""
    from clawgym_env.harness_install import installed_root

    root = installed_root("openclaw", harness.version, cache_dir)
    return root.parent / f"{root.name}-compile-cache"


def cache_env(harness: OpenClaw, cache_dir: Path) -> dict[str, str]:
    """The environment that has OpenClaw use the cache in one process.

    OpenClaw's launcher keeps its bytecode under ``$NODE_COMPILE_CACHE/openclaw/<version>/<package.json
    mtime ms>-<size>`` and, when Node runs with any other cache directory, starts a second Node process
    with that one (``OPENCLAW_PACKAGED_COMPILE_CACHE_RESPAWNED`` marks the child). Pointing Node at that
    directory and marking the process as the child skips the respawn: one Node start fewer per episode.
    """
    from clawgym_env.harness_install import installed_root

    pkg = (installed_root("openclaw", harness.version, cache_dir) / "node_modules" / "openclaw" / "package.json").stat()
    marker = f"{pkg.st_mtime_ns // 1_000_000}-{pkg.st_size}"
    return {"NODE_COMPILE_CACHE": f"{CACHE_INSIDE}/openclaw/{harness.version}/{marker}", "OPENCLAW_PACKAGED_COMPILE_CACHE_RESPAWNED": "1"}


def is_warm(harness: OpenClaw, cache_dir: Path) -> bool:
    return (cache_dir_for(harness, cache_dir) / _MARKER).is_file()


async def _warm_into(harness: OpenClaw, cache_dir: Path, target: Path) -> None:
    from clawgym_env.harness import HarnessSession
    from clawgym_env.proxy import ProxyServer, ScriptedBackend
    from clawgym_env.sandbox import Mount, SandboxConfig, create_sandbox

    with tempfile.TemporaryDirectory(prefix="clawgym-warm-") as d:
        async with ProxyServer(uds_path=Path(d) / "proxy.sock") as proxy:
            sess = proxy.open_session(ScriptedBackend(default="done"), max_calls=4)
            hs = HarnessSession(
                session_id=sess.session_id,
                base_url="http://127.0.0.1:8787",
                api_key=sess.api_key,
                model="policy",
                workspace="/workspace",
                home="/tmp/home",
            )
            mounts = (*harness.base_mounts(cache_dir), Mount(host=target, inside=CACHE_INSIDE, writable=True))
            config = SandboxConfig(proxy_socket=proxy.uds_path, mounts=mounts, memory_mb=harness.memory_mb)
            async with create_sandbox("bwrap", config) as sb:
                for path, content in harness.write_configs(hs).items():
                    src = Path(d) / "cfg"
                    src.write_text(content)
                    await sb.upload(src, path)
                env = {**harness.build_env(hs), **cache_env(harness, cache_dir)}
                env.pop("NODE_DISABLE_COMPILE_CACHE", None)
                result = await sb.exec(harness.build_command("Reply with the word done.", hs), env=env, cwd="/workspace", timeout=600)
            await proxy.close_session(sess.session_id)
    if result.return_code != 0:
        raise RuntimeError(f"warm-up turn exited {result.return_code}: {(result.stdout + result.stderr)[-800:]}")


def warm(harness: OpenClaw, cache_dir: Path) -> bool:
    """Build the warm cache if missing (idempotent, atomic); False (logged) if it could not be built."""
    target = cache_dir_for(harness, cache_dir)
    if is_warm(harness, cache_dir):
        return True
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{target.name}-", dir=target.parent))
    error: list[BaseException] = []

    def run() -> None:  # own thread: the caller may already be inside an event loop
        try:
            asyncio.run(_warm_into(harness, cache_dir, tmp))
        except BaseException as exc:  # noqa: BLE001 - reported below
            error.append(exc)

    _log.info("openclaw %s: warming its compile cache in a sandbox (one headless turn)", harness.version)
    t = threading.Thread(target=run)
    t.start()
    t.join()
    try:
        if error or not any(tmp.iterdir()):
            _log.warning("openclaw compile cache not built (%s); episodes run with it disabled", error[0] if error else "nothing written")
            return False
        (tmp / _MARKER).write_text(json.dumps({"version": harness.version}))
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
        return True
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
