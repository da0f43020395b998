"""The board in a real headless Chromium (Debian's), driven by Playwright: sorting, pages, versions, comparison.

Screenshots go to artifacts/ (gitignored) for a person to look at.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from playwright import sync_api

from clawgym_env.bundle import make_bundle
from tests.leaderboard.conftest import SUITE, TASKS, post, write_results
from tests.leaderboard.test_api import _edit_json, _rebundle

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
NEW_VERSION = "cd" * 32


def _populate(url: str, token: str, store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Seven models on the first suite version (model-g best ... model-a worst, two tied), one on a newer version."""
    tasks = list(TASKS)
    for i, letter in enumerate("gfedcba"):
        passes = max(0, 6 - i) if letter != "e" else 5  # f and e tie
        scores = {(t, "custom", k): (1.0 if j * 2 + k < passes else 0.0) for j, t in enumerate(tasks) for k in range(2)}
        data = make_bundle(write_results(tmp_path / letter, run_id=letter, model=f"model-{letter}", harnesses=("custom",), scores=scores))
        assert post(url, token, data).status_code == 201
    store.add_suite(SUITE, NEW_VERSION, tasks, TASKS, 1.0)
    newer = _rebundle(
        make_bundle(write_results(tmp_path / "n", run_id="n", model="model-next", harnesses=("custom",))),
        _edit_json("", "manifest.json", lambda m: m.update(suite_hash=NEW_VERSION)),
    )
    assert post(url, token, newer).status_code == 201


def _models(page: sync_api.Page) -> list[str]:
    return [t.strip() for t in page.locator("#board tr.row td.model a").all_inner_texts()]


def test_board_sorting_pages_versions_and_comparison(server, tmp_path: Path) -> None:
    url, token, store = server
    _populate(url, token, store, tmp_path)
    ARTIFACTS.mkdir(exist_ok=True)
    shots = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1200, "height": 900})

        def shot(name: str) -> None:
            path = ARTIFACTS / f"leaderboard-{name}.png"
            page.screenshot(path=str(path), full_page=True)
            shots.append(path)

        # The newest version is shown first; the older one is a choice away and is ranked on its own.
        page.goto(f"{url}/suite/{SUITE}")
        assert page.inner_text("#current-version") == "cd" * 6 and _models(page) == ["model-next"]
        page.select_option("#version-filter", "ab" * 6)
        page.wait_for_url("**version=" + "ab" * 6 + "*")
        assert page.inner_text("#current-version") == "ab" * 6
        assert _models(page) == [f"model-{c}" for c in "gfedcba"]
        assert page.locator("#board td.rank").all_inner_texts() == ["1", "2=", "2=", "4", "5", "6", "7"]
        shot("board")

        # Sorting: by model name, then reversed, then by mean score; ranks stay what they are.
        page.click("th[data-sort=model] a")
        page.wait_for_url("**sort=model*")
        assert _models(page) == [f"model-{c}" for c in "abcdefg"]
        assert page.locator("#board tr.row").first.locator("td.rank").inner_text() == "7"
        shot("sorted-by-model")
        page.click("th[data-sort=model] a")
        page.wait_for_url("**order=desc*")
        assert _models(page) == [f"model-{c}" for c in "gfedcba"]
        page.click("th[data-sort=mean] a")
        page.wait_for_url("**sort=mean*")
        assert _models(page)[0] == "model-g" and _models(page)[-1] == "model-a"

        # Pagination: three rows a page, the filters carried along.
        page.goto(f"{url}/suite/{SUITE}?version={'ab' * 6}&per_page=3")
        assert _models(page) == ["model-g", "model-f", "model-e"]
        assert "page 1 of 3 (7 rows)" in page.inner_text("#pager")
        page.click("#next")
        page.wait_for_url("**page=2*")
        assert _models(page) == ["model-d", "model-c", "model-b"] and "page 2 of 3" in page.inner_text("#pager")
        shot("page-2")
        page.click("#next")
        assert _models(page) == ["model-a"] and page.locator("#next").count() == 0
        page.click("#prev")
        assert _models(page) == ["model-d", "model-c", "model-b"]

        # Per-task comparison of two ticked rows.
        page.goto(f"{url}/suite/{SUITE}?version={'ab' * 6}")
        page.locator("#board tr.row", has_text="model-g").locator("input.cmp").check()
        page.locator("#board tr.row", has_text="model-a").locator("input.cmp").check()
        page.click("#compare-button")
        page.wait_for_selector("#compare")
        assert page.locator("#compare tr.task").count() == len(TASKS)
        assert page.locator("#compare-summary").inner_text().count("model-") == 2
        deltas = page.locator("#compare td.delta").all_inner_texts()
        assert deltas == ["-1.000", "-1.000", "-1.000"]  # model-g passes all six attempts, model-a none
        assert page.locator("#compare tr.task[data-better=a]").count() == 3
        shot("compare")

        # From the board to a submission page: per-category table and the failed-only filter.
        page.goto(f"{url}/suite/{SUITE}?version={'ab' * 6}")
        page.locator("#board a", has_text="model-c").click()
        page.wait_for_selector("#attempts")
        assert page.locator("#categories tbody tr").count() == 2
        page.click("#failed-filter a")
        page.wait_for_url("**failed=true*")
        assert page.locator("#attempts tr.attempt.failed").count() == 4 and page.locator("#attempts tr.attempt.passed").count() == 0
        shot("submission-failed")
        browser.close()
    assert all(s.stat().st_size > 5000 for s in shots)
