"""``--rollout_process``: the hf rollout policy in a child process samples what the in-process one does."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch

from clawgym_env.errors import PolicyBackendError
from clawgym_env.proxy.backends.base import CompletionRequest
from clawgym_env.proxy.backends.hf import HFBackend
from trainers.core.rollout_process import ChildHFBackend


def _request(call: int) -> CompletionRequest:
    return CompletionRequest(session_id="s-1", call_index=call, prompt_ids=[1, 5, 9, 14, 3], messages=[], max_tokens=8)


def test_child_backend_samples_and_takes_weights_as_the_in_process_one(tiny_path: Path) -> None:
    spec = f"hf:{tiny_path}?max_batch=1&seed=3"
    here, child = HFBackend(tiny_path, max_batch=1, seed=3), ChildHFBackend(spec, tiny_path)
    try:

        async def both(call: int) -> tuple[object, object]:
            return await here.handle(_request(call)), await child.handle(_request(call))

        a, b = asyncio.run(both(0))
        assert b.completion_ids == a.completion_ids and len(a.completion_ids) > 0
        assert b.logprobs == pytest.approx(a.logprobs, abs=1e-6)
        state = {k: v + 0.05 * torch.randn_like(v) for k, v in here.model.state_dict().items()}
        here.update_weights(state, 7)
        child.update_weights(state, 7)
        c, d = asyncio.run(both(1))  # sent after the push: sampled by the new weights
        child.wait_loaded()
        assert d.policy_version == c.policy_version == 7
        assert d.completion_ids == c.completion_ids
        assert d.logprobs == pytest.approx(c.logprobs, abs=1e-6)
    finally:
        asyncio.run(here.aclose())
        asyncio.run(child.aclose())
    assert not child._proc.is_alive()
    with pytest.raises(PolicyBackendError, match="closed"):
        asyncio.run(child.handle(_request(2)))


def test_child_backend_refuses_what_is_not_an_hf_policy(tiny_path: Path) -> None:
    with pytest.raises(PolicyBackendError, match="hf: policy"):
        ChildHFBackend(f"scripted:x?tokenizer={tiny_path}", tiny_path)


def test_a_child_that_dies_at_start_gives_the_reason_not_an_eof(tiny_path: Path, tmp_path: Path) -> None:
    # a spawned child imports the main module first; a script without the main guard makes it fail there (here: exit)
    import os
    import subprocess
    import sys

    script = tmp_path / "train.py"
    script.write_text(
        "import sys\nif __name__ == '__mp_main__':\n    sys.exit(3)\n"
        "from trainers.core.rollout_process import ChildHFBackend\n"
        f"ChildHFBackend('hf:{tiny_path}', {str(tiny_path)!r})\n"
    )
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode != 0
    assert "PolicyBackendError" in done.stderr and "exited (code 3)" in done.stderr
    assert '__name__ == "__main__"' in done.stderr and "EOFError" not in done.stderr
