"""The leaderboard server: a JSON API for submissions and boards, and the HTML pages."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.concurrency import run_in_threadpool

from clawgym_env.bundle import BundleLimits
from clawgym_env.capture.records import CallRecord
from clawgym_env.errors import LeaderboardError
from leaderboard import views
from leaderboard.store import Store
from leaderboard.submit import accept_submission

__all__ = ["create_app", "export_site"]


def create_app(store: Store, limits: BundleLimits | None = None) -> FastAPI:
    """Build the app around an open store."""
    limits = limits or BundleLimits()
    app = FastAPI(title="ClawGym leaderboard")

    @app.post("/api/submissions")
    async def submit(request: Request) -> JSONResponse:
        auth = request.headers.get("authorization", "")
        token = auth[7:] if auth.lower().startswith("bearer ") else ""
        submitter = await run_in_threadpool(store.submitter_for, token) if token else None
        if submitter is None:
            return JSONResponse({"error": "missing or unknown submitter token (ask an admin for one)"}, status_code=401)
        declared = int(request.headers.get("content-length") or 0)
        if declared > limits.max_compressed_bytes:
            return _too_big(limits)
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > limits.max_compressed_bytes:
                return _too_big(limits)
        try:
            sub_id = await run_in_threadpool(accept_submission, store, submitter, bytes(body), limits)
        except LeaderboardError as exc:
            return JSONResponse({"error": str(exc)}, status_code=422)
        sub = await run_in_threadpool(store.submission, sub_id)
        assert sub is not None
        return JSONResponse({"id": sub_id, "url": f"/submission/{sub_id}", "metrics": sub.metrics["overall"]},
                            status_code=201)

    @app.get("/api/suites")
    def suites() -> list[str]:
        return store.suite_names()

    @app.get("/api/boards/{suite}")
    def board(suite: str) -> list[dict]:  # type: ignore[type-arg]
        return views.board_rows(store.submissions(suite))

    @app.get("/api/submissions/{sub_id}")
    def submission(sub_id: str) -> dict:  # type: ignore[type-arg]
        sub = _get(store, sub_id)
        return {"id": sub.id, "suite": sub.suite, "model": sub.model, "harnesses": sub.harnesses,
                "metrics": sub.metrics, "attempts": [a.record for a in sub.attempts]}

    @app.get("/", response_class=HTMLResponse)
    def index() -> str:
        return views.render("index.html", suites=store.suite_names())

    @app.get("/suite/{suite}", response_class=HTMLResponse)
    def board_page(suite: str) -> str:
        if suite not in store.suite_names():
            raise HTTPException(404, f"no suite {suite!r}")
        return views.render("board.html", **views.board_context(store, suite))

    @app.get("/submission/{sub_id}", response_class=HTMLResponse)
    def submission_page(sub_id: str) -> str:
        sub = _get(store, sub_id)
        return views.render("submission.html", sub=sub, attempts=_sorted(sub))

    @app.get("/submission/{sub_id}/trajectory/{session}", response_class=HTMLResponse)
    def trajectory_page(sub_id: str, session: str) -> str:
        sub = _get(store, sub_id)
        if session not in sub.captures:
            raise HTTPException(404, "no capture for that attempt")
        return views.render("trajectory.html", sub=sub, session=session, calls=_calls(sub.captures[session]))

    return app


def _too_big(limits: BundleLimits) -> JSONResponse:
    return JSONResponse({"error": f"body over {limits.max_compressed_bytes} bytes"}, status_code=413)


def _get(store: Store, sub_id: str):  # type: ignore[no-untyped-def]
    sub = store.submission(sub_id)
    if sub is None:
        raise HTTPException(404, f"no submission {sub_id!r}")
    return sub


def _sorted(sub):  # type: ignore[no-untyped-def]
    return sorted(sub.attempts, key=lambda a: (a.task_id, a.harness, a.attempt))


def _calls(jsonl: str) -> list[CallRecord]:
    calls = []
    for line in jsonl.splitlines():
        try:
            calls.append(CallRecord.model_validate_json(line))
        except ValueError:
            continue  # a torn last line of a crashed run
    return calls


def export_site(store: Store, out_dir: Path) -> list[Path]:
    """Write the whole leaderboard as static HTML files anyone can host."""
    out_dir.mkdir(parents=True, exist_ok=True)
    pages: dict[str, str] = {"index.html": views.render("index.html", static=True, suites=store.suite_names())}
    for suite in store.suite_names():
        pages[f"board-{suite}.html"] = views.render("board.html", static=True, **views.board_context(store, suite))
        for sub in store.submissions(suite):
            pages[f"submission-{sub.id}.html"] = views.render("submission.html", static=True, sub=sub,
                                                              attempts=_sorted(sub))
            for session, jsonl in sub.captures.items():
                pages[f"trajectory-{sub.id}-{session}.html"] = views.render(
                    "trajectory.html", static=True, sub=sub, session=session, calls=_calls(jsonl))
    written = []
    for name, html in pages.items():
        path = out_dir / name
        tmp = path.with_suffix(".tmp")
        tmp.write_text(html, encoding="utf-8")
        tmp.replace(path)
        written.append(path)
    return written
