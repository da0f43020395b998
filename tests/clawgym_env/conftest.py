"""Helpers for task, grading and authoring tests: build small suites in tmp folders."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import shared_data_dir

SAMPLE = shared_data_dir() / "clawgym-sample"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "importers"

MakeTask = Callable[..., Path]


@pytest.fixture
def suite_dir(tmp_path: Path) -> Path:
    d = tmp_path / "demo"
    d.mkdir()
    (d / "suite.yaml").write_text("name: demo\ndescription: test suite\npass_threshold: 1.0\n")
    return d


@pytest.fixture
def make_task(suite_dir: Path) -> MakeTask:
    """make_task(spec_dict, files={"hidden/grade.py": "..."}) -> task folder."""

    def make(spec: dict[str, Any], files: dict[str, str] | None = None) -> Path:
        tdir = suite_dir / spec["id"]
        if tdir.exists():
            shutil.rmtree(tdir)
        tdir.mkdir()
        for rel, text in (files or {}).items():
            p = tdir / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        (tdir / "task.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
        return tdir

    return make


@pytest.fixture
def sample_dir() -> Path:
    if not SAMPLE.is_dir():
        pytest.fail(f"the ClawGym sample data is missing at {SAMPLE}")
    return SAMPLE
