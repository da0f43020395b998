"""The leaderboard's store: SQLAlchemy tables and the few queries the server needs.

SQLite by default (WAL, busy timeout, so concurrent submitters serialise instead of failing);
PostgreSQL through any ``postgresql+psycopg://`` URL (both are tested). A submission, its
attempts and its captures are written in one transaction: a crash or restart mid-submission
leaves either all of it or none of it. One result set is stored once: the database itself
refuses a second row with the same (suite, suite version, results digest), so concurrent
uploads of one run cannot both be accepted. Captures live in their own table and are read only
by the trajectory pages; the board reads submission rows alone.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    func,
    select,
)
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship, selectinload, sessionmaker

from clawgym_env.errors import LeaderboardError

__all__ = ["AttemptRow", "CaptureRow", "Store", "SubmissionRow", "SubmitterRow", "SuiteRow"]


class Base(DeclarativeBase):
    pass


class SubmitterRow(Base):
    __tablename__ = "submitters"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[str] = mapped_column(String(40))


class SuiteRow(Base):
    """One registered version of a suite; ``source_dir`` is the server's own copy (with hidden files)."""

    __tablename__ = "suites"
    __table_args__ = (UniqueConstraint("name", "content_hash"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), index=True)
    content_hash: Mapped[str] = mapped_column(String(128))
    task_ids: Mapped[list[str]] = mapped_column(JSON)
    categories: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    pass_threshold: Mapped[float] = mapped_column(Float, default=1.0)
    registered_at: Mapped[str] = mapped_column(String(40), default="")
    source_dir: Mapped[str | None] = mapped_column(Text, nullable=True)

    @property
    def version(self) -> str:
        """The short form of the content hash shown on pages and used in URLs."""
        return short_hash(self.content_hash)


class SubmissionRow(Base):
    __tablename__ = "submissions"
    __table_args__ = (UniqueConstraint("suite", "suite_hash", "results_sha256", name="one_row_per_result_set"),)
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    suite: Mapped[str] = mapped_column(String(200), index=True)
    suite_hash: Mapped[str] = mapped_column(String(128), index=True)
    run_id: Mapped[str] = mapped_column(String(200))
    model: Mapped[str] = mapped_column(String(500))
    harnesses: Mapped[dict[str, str]] = mapped_column(JSON)
    attempts_per_task: Mapped[int] = mapped_column(Integer)
    submitter_id: Mapped[int] = mapped_column(ForeignKey("submitters.id"))
    created_at: Mapped[str] = mapped_column(String(40))
    bundle_sha256: Mapped[str] = mapped_column(String(64))
    results_sha256: Mapped[str] = mapped_column(String(64))
    """Digest of what was measured (manifest less run id and dates, attempts less session ids and times)."""
    has_captures: Mapped[bool] = mapped_column(Boolean, default=False)
    evaluation_only: Mapped[bool] = mapped_column(Boolean, default=False)
    trust: Mapped[str] = mapped_column(String(20), default="self-reported")
    """"self-reported" (scores as submitted, checked for consistency) or "re-graded" (the server's own)."""
    disagreements: Mapped[int] = mapped_column(Integer, default=0)
    """Re-graded attempts whose submitted score differs from the server's."""
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON)
    """What the row is ranked by (the server's scores when re-graded), plus per_harness_category."""
    claimed_metrics: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    """Metrics of the scores as submitted, kept for re-graded rows to show the disagreement."""
    manifest: Mapped[dict[str, Any]] = mapped_column(JSON)
    attempts: Mapped[list[AttemptRow]] = relationship(back_populates="submission", cascade="all, delete-orphan")
    submitter: Mapped[SubmitterRow] = relationship()

    @property
    def version(self) -> str:
        return short_hash(self.suite_hash)


class AttemptRow(Base):
    __tablename__ = "attempts"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    submission_id: Mapped[str] = mapped_column(ForeignKey("submissions.id"), index=True)
    task_id: Mapped[str] = mapped_column(String(300))
    harness: Mapped[str] = mapped_column(String(100))
    attempt: Mapped[int] = mapped_column(Integer)
    category: Mapped[str] = mapped_column(String(100))
    session_id: Mapped[str] = mapped_column(String(200), default="")
    status: Mapped[str] = mapped_column(String(20))
    passed: Mapped[bool] = mapped_column(Boolean)
    score: Mapped[float] = mapped_column(Float)
    """The score the row is ranked by: the server's when re-graded, else as submitted."""
    claimed_score: Mapped[float] = mapped_column(Float)
    claimed_passed: Mapped[bool] = mapped_column(Boolean)
    regrade: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    """The server's verdict when re-graded: {"score", "subscores", "output", "errors"}."""
    record: Mapped[dict[str, Any]] = mapped_column(JSON)
    submission: Mapped[SubmissionRow] = relationship(back_populates="attempts")

    @property
    def disagrees(self) -> bool:
        return self.regrade is not None and (abs(self.score - self.claimed_score) > 1e-9 or self.passed != self.claimed_passed)


class CaptureRow(Base):
    """One attempt's captured calls (JSONL), apart from the rows every board view reads."""

    __tablename__ = "captures"
    __table_args__ = (UniqueConstraint("submission_id", "session_id"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    submission_id: Mapped[str] = mapped_column(ForeignKey("submissions.id"), index=True)
    session_id: Mapped[str] = mapped_column(String(200))
    jsonl: Mapped[str] = mapped_column(Text)


def short_hash(content_hash: str) -> str:
    return content_hash.rpartition(":")[2][:12]


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Store:
    """Opens the database and creates the tables; hands out sessions."""

    def __init__(self, url: str) -> None:
        self.url = url
        connect_args = {"timeout": 30, "check_same_thread": False} if url.startswith("sqlite") else {}
        self.engine: Engine = create_engine(url, connect_args=connect_args, pool_pre_ping=not url.startswith("sqlite"))
        if url.startswith("sqlite"):
            event.listen(self.engine, "connect", _sqlite_pragmas)
        Base.metadata.create_all(self.engine)
        _check_schema(self.engine, url)
        self.session = sessionmaker(self.engine, expire_on_commit=False)

    def add_submitter(self, name: str) -> str:
        """Create a submitter and return its token (shown once; only its hash is stored)."""
        token = "cgl_" + secrets.token_urlsafe(24)
        try:
            with self.session.begin() as s:
                s.add(SubmitterRow(name=name, token_sha256=hash_token(token), created_at=_now()))
        except IntegrityError:
            raise LeaderboardError(
                f"submitter {name!r} already exists in {self.url}; pick another name (tokens are shown once and cannot be shown again)"
            ) from None
        return token

    def submitter_for(self, token: str) -> SubmitterRow | None:
        with self.session() as s:
            return s.scalar(select(SubmitterRow).where(SubmitterRow.token_sha256 == hash_token(token)))

    def add_suite(
        self,
        name: str,
        content_hash: str,
        task_ids: list[str],
        categories: dict[str, str],
        pass_threshold: float,
        source_dir: str | None = None,
    ) -> None:
        """Register a suite version (idempotent; a later call may set the folder used for re-grading)."""
        try:
            with self.session.begin() as s:
                row = s.scalar(select(SuiteRow).where(SuiteRow.name == name, SuiteRow.content_hash == content_hash))
                if row is None:
                    s.add(
                        SuiteRow(
                            name=name,
                            content_hash=content_hash,
                            task_ids=task_ids,
                            categories=categories,
                            pass_threshold=pass_threshold,
                            registered_at=_now(),
                            source_dir=source_dir,
                        )
                    )
                elif source_dir:
                    row.source_dir = source_dir
        except IntegrityError:  # registered concurrently by another process: the same row
            return

    def suite(self, name: str, content_hash: str) -> SuiteRow | None:
        with self.session() as s:
            return s.scalar(select(SuiteRow).where(SuiteRow.name == name, SuiteRow.content_hash == content_hash))

    def suite_names(self) -> list[str]:
        with self.session() as s:
            return sorted(set(s.scalars(select(SuiteRow.name))))

    def suite_versions(self, name: str) -> list[SuiteRow]:
        """Registered versions of a suite, newest first."""
        with self.session() as s:
            rows = s.scalars(select(SuiteRow).where(SuiteRow.name == name).order_by(SuiteRow.registered_at.desc(), SuiteRow.id.desc()))
            return list(rows)

    def submissions(self, suite: str | None = None, suite_hash: str | None = None) -> list[SubmissionRow]:
        """Ranking rows with their submitter (no attempts, no captures: the board needs neither)."""
        with self.session() as s:
            q = select(SubmissionRow).options(selectinload(SubmissionRow.submitter))
            if suite:
                q = q.where(SubmissionRow.suite == suite)
            if suite_hash:
                q = q.where(SubmissionRow.suite_hash == suite_hash)
            return list(s.scalars(q.order_by(SubmissionRow.created_at, SubmissionRow.id)))

    def submission(self, sub_id: str) -> SubmissionRow | None:
        """One submission with its attempts and submitter loaded (captures stay in their table)."""
        with self.session() as s:
            q = (
                select(SubmissionRow)
                .where(SubmissionRow.id == sub_id)
                .options(selectinload(SubmissionRow.attempts), selectinload(SubmissionRow.submitter))
            )
            return s.scalar(q)

    def submission_with_results(self, suite: str, suite_hash: str, results_sha256: str) -> str | None:
        with self.session() as s:
            return s.scalar(
                select(SubmissionRow.id).where(
                    SubmissionRow.suite == suite, SubmissionRow.suite_hash == suite_hash, SubmissionRow.results_sha256 == results_sha256
                )
            )

    def capture(self, sub_id: str, session_id: str) -> str | None:
        with self.session() as s:
            return s.scalar(select(CaptureRow.jsonl).where(CaptureRow.submission_id == sub_id, CaptureRow.session_id == session_id))

    def capture_sessions(self, sub_id: str) -> set[str]:
        with self.session() as s:
            return set(s.scalars(select(CaptureRow.session_id).where(CaptureRow.submission_id == sub_id)))

    def count(self) -> tuple[int, int]:
        """(submissions, attempts): used by tests to prove a refusal changed nothing."""
        with self.session() as s:
            return (
                s.scalar(select(func.count()).select_from(SubmissionRow)) or 0,
                s.scalar(select(func.count()).select_from(AttemptRow)) or 0,
            )


def _check_schema(engine: Engine, url: str) -> None:
    """A database made by an older leaderboard lacks columns; say so instead of failing on the first query."""
    from sqlalchemy import inspect

    have = inspect(engine)
    for table in Base.metadata.sorted_tables:
        missing = {c.name for c in table.columns} - {c["name"] for c in have.get_columns(table.name)}
        if missing:
            raise LeaderboardError(
                f"the leaderboard database {url} was made by an older version (table {table.name} lacks "
                f"{', '.join(sorted(missing))}); start a new database and re-register suites and submitters"
            )


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=FULL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()
