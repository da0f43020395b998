"""The HTML pages over HTTP: ties, per-category ranking, submission and trajectory pages, 404s."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from clawgym_env.bundle import make_bundle
from clawgym_env.capture.records import CallRecord
from tests.leaderboard.conftest import SUITE, TASKS, post, write_results

ALL_PASS = {(t, "custom", a): 1.0 for t in TASKS for a in range(2)}


def _ranks(html: str) -> list[str]:
    return re.findall(r'<td class="rank">(\d+)', html)


def test_equal_rows_share_a_rank(server, tmp_path: Path) -> None:
    url, token, _ = server
    for i in range(4):
        data = make_bundle(write_results(tmp_path / f"p{i}", run_id=f"p{i}", model=f"perfect-{i}", harnesses=("custom",), scores=ALL_PASS))
        assert post(url, token, data).status_code == 201
    assert post(url, token, make_bundle(write_results(tmp_path / "w", run_id="w", model="worse", harnesses=("custom",)))).status_code == 201
    rows = httpx.get(f"{url}/api/boards/{SUITE}").json()
    assert sorted(r["rank"] for r in rows) == [1, 1, 1, 1, 5]
    assert _ranks(httpx.get(f"{url}/suite/{SUITE}").text) == ["1", "1", "1", "1", "5"]


def test_category_filter_reranks_and_says_what_it_ranks(server, tmp_path: Path) -> None:
    url, token, _ = server
    # model-a passes everything in analysis, nothing in content; model-b the other way round.
    a = {(t, "custom", k): (1.0 if c == "analysis" else 0.0) for t, c in TASKS.items() for k in range(2)}
    b = {(t, "custom", k): (1.0 if c == "content" else 0.0) for t, c in TASKS.items() for k in range(2)}
    for name, scores in (("model-a", a), ("model-b", b)):
        assert (
            post(
                url, token, make_bundle(write_results(tmp_path / name, run_id=name, model=name, harnesses=("custom",), scores=scores))
            ).status_code
            == 201
        )
    overall = httpx.get(f"{url}/api/boards/{SUITE}").json()
    assert [r["model"] for r in overall] == ["model-a", "model-b"]  # 4 of 6 vs 2 of 6
    content = httpx.get(f"{url}/api/boards/{SUITE}", params={"category": "content"}).json()
    assert [(r["model"], r["rank"], r["metric"]) for r in content] == [("model-b", 1, 1.0), ("model-a", 2, 0.0)]
    html = httpx.get(f"{url}/suite/{SUITE}", params={"category": "content"}).text
    assert "content pass rate %" in html and "Pass@1 %</a>" not in html
    assert html.index("model-b") < html.index("model-a")


def test_submission_page_has_categories_pass_at_k_and_failed_filter(server, tmp_path: Path) -> None:
    url, token, _ = server
    r = post(url, token, make_bundle(write_results(tmp_path / "run", harnesses=("custom",), k=4)))
    sub_id = r.json()["id"]
    html = httpx.get(f"{url}/submission/{sub_id}").text
    assert 'id="categories"' in html and "<td>analysis</td>" in html and "<td>content</td>" in html
    assert "Pass@2 %" in html and "Pass@4 %" in html
    assert re.search(r'id="pass-count">6 / 12<', html)
    assert html.count('class="attempt ') == 12
    failed = httpx.get(f"{url}/submission/{sub_id}", params={"failed": "true"}).text
    assert failed.count('class="attempt failed"') == 6 and 'class="attempt passed"' not in failed


def test_trajectory_page_is_titled_by_task_with_score_and_verdict(server, tmp_path: Path) -> None:
    url, token, _ = server
    results = write_results(tmp_path / "run", harnesses=("custom",), k=1)
    sid = "run-1-1-custom-0"  # lb-suite/beta, attempt 0: score 0.25, failed
    call = CallRecord(
        session_id=sid,
        call_index=0,
        dialect="openai-chat",
        messages=[{"role": "user", "content": "go"}],
        response={
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": {"cmd": "make && make test > out.txt"}}}
            ],
        },
    )
    (results / "captures" / f"{sid}.jsonl").write_text(call.model_dump_json() + "\n")
    sub_id = post(url, token, make_bundle(results)).json()["id"]
    page = httpx.get(f"{url}/submission/{sub_id}/trajectory/{sid}").text
    assert "<title>lb-suite/beta" in page and "<h1>lb-suite/beta</h1>" in page
    assert re.search(r'id="verdict">.*score <b>0\.250</b>.*failed', page, re.S)
    assert "make &amp;&amp; make test &gt; out.txt" in page and "\\u0026" not in page


def test_unknown_pages_answer_html_and_the_api_json(server) -> None:
    url, _, _ = server
    for path in ("/nowhere", "/suite/no-such-suite", "/submission/nope", "/submission/nope/trajectory/x"):
        r = httpx.get(url + path)
        assert r.status_code == 404 and r.headers["content-type"].startswith("text/html"), path
        assert "<h1>Not found</h1>" in r.text
    api = httpx.get(url + "/api/submissions/nope")
    assert api.status_code == 404 and api.json()["error"] == "no submission 'nope'"


def test_chart_labels_each_have_their_own_line(server, tmp_path: Path) -> None:
    url, token, _ = server
    for i in range(6):
        assert (
            post(
                url,
                token,
                make_bundle(
                    write_results(
                        tmp_path / f"m{i}",
                        run_id=f"m{i}",
                        model=f"a-rather-long-model-name-{i}",
                        scores={("lb-suite/alpha", "custom", 0): i / 10},
                    )
                ),
            ).status_code
            == 201
        )
    html = httpx.get(f"{url}/suite/{SUITE}").text
    ys = [int(y) for y in re.findall(r'<text x="\d+" y="(\d+)" font-size="11" text-anchor="end">', html)]
    assert len(ys) == 12 and all(b - a >= 16 for a, b in zip(ys, ys[1:]))  # 16 px text never overlaps at 22 px pitch
