"""The leaderboard server: a JSON API for submissions and boards, and the HTML pages."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from clawgym_env.bundle import BundleLimits
from clawgym_env.capture.records import CallRecord
from clawgym_env.capture.store import iter_capture
from clawgym_env.errors import LeaderboardError
from leaderboard import views
from leaderboard.store import AttemptRow, Store, SubmissionRow
from leaderboard.submit import accept_submission

__all__ = ["create_app", "export_site"]


def create_app(store: Store, limits: BundleLimits | None = None, sandbox: str = "bwrap") -> FastAPI:
    """Build the app around an open store; ``sandbox`` is the backend re-grading runs in."""
    limits = limits or BundleLimits()
    app = FastAPI(title="ClawGym leaderboard")

    @app.exception_handler(StarletteHTTPException)
    async def not_found(request: Request, exc: StarletteHTTPException) -> Response:
        """JSON for the API, a page for people."""
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": exc.detail}, status_code=exc.status_code)
        html = views.render("error.html", status=exc.status_code, message=exc.detail)
        return HTMLResponse(html, status_code=exc.status_code)

    @app.post("/api/submissions")
    async def submit(request: Request) -> JSONResponse:
        auth = request.headers.get("authorization", "")
        token = auth[7:] if auth.lower().startswith("bearer ") else ""
        submitter = await run_in_threadpool(store.submitter_for, token) if token else None
        if submitter is None:
            return JSONResponse({"error": "missing or unknown submitter token (ask an admin for one)"}, status_code=401)
        try:
            declared = int(request.headers.get("content-length") or 0)
        except ValueError:
            declared = 0
        if declared > limits.max_compressed_bytes:
            return _too_big(limits)
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > limits.max_compressed_bytes:
                return _too_big(limits)
        try:
            sub_id = await run_in_threadpool(accept_submission, store, submitter, bytes(body), limits, sandbox)
        except LeaderboardError as exc:
            return JSONResponse({"error": str(exc)}, status_code=422)
        sub = await run_in_threadpool(store.submission, sub_id)
        assert sub is not None
        return JSONResponse(
            {
                "id": sub_id,
                "url": f"/submission/{sub_id}",
                "trust": sub.trust,
                "disagreements": sub.disagreements,
                "metrics": sub.metrics["overall"],
            },
            status_code=201,
        )

    @app.get("/api/suites")
    def suites() -> list[str]:
        return store.suite_names()

    @app.get("/api/boards/{suite}")
    def board(suite: str, version: str = "", category: str = "") -> list[dict[str, Any]]:
        """Rows of every version (ranked per version), or of one."""
        match = [v for v in store.suite_versions(suite) if v.version == version]
        if version and not match:
            raise HTTPException(404, f"suite {suite!r} has no version {version!r}")
        return views.board_rows(store.submissions(suite, match[0].content_hash if match else None), category)

    @app.get("/api/submissions/{sub_id}")
    def submission(sub_id: str) -> dict[str, Any]:
        sub = _get(store, sub_id)
        return {
            "id": sub.id,
            "suite": sub.suite,
            "suite_version": sub.version,
            "model": sub.model,
            "harnesses": sub.harnesses,
            "trust": sub.trust,
            "disagreements": sub.disagreements,
            "metrics": sub.metrics,
            "claimed_metrics": sub.claimed_metrics,
            "attempts": [
                {**a.record, "server_score": a.score if a.regrade else None, "passed": a.passed, "regrade": a.regrade} for a in _sorted(sub)
            ],
        }

    @app.get("/", response_class=HTMLResponse)
    def index() -> str:
        return views.render("index.html", suites=[(s, store.suite_versions(s)) for s in store.suite_names()])

    @app.get("/suite/{suite}", response_class=HTMLResponse)
    def board_page(
        suite: str,
        version: str = "",
        harness: str = "",
        category: str = "",
        trust: str = "",
        q: str = "",
        sort: str = "rank",
        order: str = "",
        page: int = 1,
        per_page: int = 25,
    ) -> str:
        if suite not in store.suite_names():
            raise HTTPException(404, f"no suite {suite!r} on this leaderboard")
        query = views.BoardQuery(version, harness, category, trust, q, sort, order, page, per_page)
        return views.render("board.html", **views.board_context(store, suite, query))

    @app.get("/submission/{sub_id}", response_class=HTMLResponse)
    def submission_page(sub_id: str, failed: bool = False) -> str:
        sub = _get(store, sub_id)
        return _submission_html(store, sub, failed=failed)

    @app.get("/submission/{sub_id}/trajectory/{session}", response_class=HTMLResponse)
    def trajectory_page(sub_id: str, session: str) -> str:
        sub = _get(store, sub_id)
        jsonl = store.capture(sub_id, session)
        if jsonl is None:
            raise HTTPException(404, f"submission {sub_id} has no capture for session {session!r}")
        return _trajectory_html(sub, session, jsonl)

    @app.get("/compare", response_class=HTMLResponse)
    def compare_page(s: Annotated[list[str], Query()] = []) -> str:  # noqa: B006 (FastAPI reads the default)
        if len(s) != 2:
            raise HTTPException(400, "pick exactly two submissions to compare (tick two rows on a board)")
        a, b = _get(store, s[0]), _get(store, s[1])
        return views.render("compare.html", a=a, b=b, rows=views.compare_rows(a, b))

    return app


def _too_big(limits: BundleLimits) -> JSONResponse:
    return JSONResponse({"error": f"body over {limits.max_compressed_bytes} bytes"}, status_code=413)


def _get(store: Store, sub_id: str) -> SubmissionRow:
    sub = store.submission(sub_id)
    if sub is None:
        raise HTTPException(404, f"no submission {sub_id!r}")
    return sub


def _sorted(sub: SubmissionRow) -> list[AttemptRow]:
    return sorted(sub.attempts, key=lambda a: (a.task_id, a.harness, a.attempt))


def _submission_html(store: Store, sub: SubmissionRow, *, failed: bool = False, static: bool = False) -> str:
    attempts = _sorted(sub)
    shown = [a for a in attempts if not a.passed] if failed else attempts
    return views.render(
        "submission.html",
        static=static,
        sub=sub,
        attempts=shown,
        failed=failed,
        n_failed=sum(not a.passed for a in attempts),
        captured=store.capture_sessions(sub.id),
    )


def _trajectory_html(sub: SubmissionRow, session: str, jsonl: str, static: bool = False) -> str:
    attempt = next((a for a in sub.attempts if a.session_id == session), None)
    return views.render("trajectory.html", static=static, sub=sub, session=session, attempt=attempt, calls=_calls(jsonl, session))


def _calls(jsonl: str, session: str) -> list[CallRecord]:
    # a line that gives no record (a torn last line of a crashed run, or one an uploader broke) is left out
    return [r for _, r in iter_capture(jsonl.encode(), f"captures/{session}.jsonl") if isinstance(r, CallRecord)]


def export_site(store: Store, out_dir: Path) -> list[Path]:
    """Write the whole leaderboard as static HTML files anyone can host (one board per suite version)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    suites = [(s, store.suite_versions(s)) for s in store.suite_names()]
    pages: dict[str, str] = {"index.html": views.render("index.html", static=True, suites=suites)}
    for suite, versions in suites:
        for i, v in enumerate(versions):
            ctx = views.board_context(store, suite, views.BoardQuery(version=v.version), paginate=False)
            html = views.render("board.html", static=True, **ctx)
            pages[f"board-{suite}-{v.version}.html"] = html
            if i == 0:
                pages[f"board-{suite}.html"] = html
        for row in store.submissions(suite):
            sub = store.submission(row.id)
            assert sub is not None
            pages[f"submission-{sub.id}.html"] = _submission_html(store, sub, static=True)
            for session in sorted(store.capture_sessions(sub.id)):
                jsonl = store.capture(sub.id, session) or ""
                pages[f"trajectory-{sub.id}-{session}.html"] = _trajectory_html(sub, session, jsonl, static=True)
    written = []
    for name, html in pages.items():
        path = out_dir / name
        tmp = path.with_suffix(".tmp")
        tmp.write_text(html, encoding="utf-8")
        tmp.replace(path)
        written.append(path)
    return written
