"""The board in a real headless Chromium (Debian's), driven by Playwright."""

from __future__ import annotations

import shutil
from pathlib import Path

from playwright import sync_api

from clawgym_env.bundle import make_bundle
from tests.leaderboard.conftest import post, write_results

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def test_board_filters_and_submission_page(server, tmp_path: Path) -> None:
    url, token, _store = server
    assert post(url, token, make_bundle(write_results(tmp_path / "a", run_id="a", model="model-a"))).status_code == 201
    assert post(url, token, make_bundle(write_results(tmp_path / "b", run_id="b", model="model-b",
                                                      harnesses=("openclaw",), k=1))).status_code == 201
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page()
        page.goto(f"{url}/suite/lb-suite")
        rows = page.locator("#board tr.row")
        assert rows.count() == 3  # model-a x {custom, claude-code}, model-b x openclaw
        assert page.locator("#plot rect.bar").count() == 3
        page.select_option("#harness-filter", "openclaw")
        visible = page.locator("#board tr.row:not(.hidden)")
        assert visible.count() == 1 and "model-b" in visible.inner_text()
        page.select_option("#category-filter", "content")
        # model-b's only content task (beta, attempt 0) scores 0.25 -> 0.0 % on that category
        assert visible.locator(".pass1").inner_text() == "0.0"
        page.screenshot(path=str(ARTIFACTS / "leaderboard-board.png"), full_page=True)
        page.select_option("#harness-filter", "")
        page.select_option("#category-filter", "")
        assert page.locator("#board tr.row:not(.hidden)").count() == 3
        page.locator("#board a", has_text="model-a").first.click()
        page.wait_for_selector("#attempts")
        assert "Pass@1" in page.inner_text("body")
        assert page.locator("#attempts tbody tr").count() == 12
        page.screenshot(path=str(ARTIFACTS / "leaderboard-submission.png"), full_page=True)
        browser.close()
    assert (ARTIFACTS / "leaderboard-board.png").stat().st_size > 1000
