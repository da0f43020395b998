"""A sandbox holds at most ``SandboxConfig.max_files`` files while it runs, and closing it removes them
with its tmpfs (no walk over what the agent made)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from clawgym_env.sandbox._tmpfs import mounts_under

FLOOD = "mkdir -p {d} && cd {d} && seq 1 5000 | xargs touch 2> err.txt; ls | wc -l; grep -c 'No space left' err.txt"


@pytest.mark.parametrize("where", ["/workspace/many", "/tmp/many"])
async def test_files_past_the_limit_cannot_be_made(make: Callable[..., Any], backend: str, where: str) -> None:
    sb = await make(max_files=2000)
    r = await sb.exec(["bash", "-c", FLOOD.format(d=where)], timeout=120)
    made, refused = (int(x) for x in r.stdout.split())
    assert made < 2000 and refused > 0, (r.stdout, r.stderr)
    if backend == "bwrap":
        assert sb.file_limit and mounts_under(sb.dir) == [sb.dir]  # type: ignore[attr-defined]
        folder = sb.dir  # type: ignore[attr-defined]
        await sb.close()
        assert not folder.exists() and mounts_under(folder) == []
