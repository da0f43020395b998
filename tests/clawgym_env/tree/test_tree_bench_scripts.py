"""The prepared GPU benchmark must at least run its CPU dry-run path (same code, tiny shape)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_gpu_tree_dry_run_on_cpu(tmp_path: Path) -> None:
    out = tmp_path / "gpu_tree.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gpu_tree.py"), "--dry-run", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(out.read_text())["results"]
    assert [r["episode"] for r in results] == ["SYNTHETIC claude-code", "SYNTHETIC openclaw"]
    for r in results:
        assert r["tokens_per_call_layout"] > r["tokens_tree"] and r["tokens_tree_padded"] % 128 == 0
        assert r["max_abs_logprob_diff_first_calls"] < 1e-4  # flex over the BlockMask == per-call sdpa
