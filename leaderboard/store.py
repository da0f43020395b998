"""The leaderboard's store: SQLAlchemy tables and the few queries the server needs.

SQLite by default (WAL, busy timeout, so concurrent submitters serialise instead of failing);
any SQLAlchemy URL (PostgreSQL) works. A submission and its attempts are written in one
transaction: a crash or restart mid-submission leaves either all of it or none of it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from typing import Any

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Integer, String, UniqueConstraint, create_engine, event, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship, selectinload, sessionmaker

from clawgym_env.errors import LeaderboardError

__all__ = ["AttemptRow", "Store", "SubmissionRow", "SubmitterRow", "SuiteRow"]


class Base(DeclarativeBase):
    pass


class SubmitterRow(Base):
    __tablename__ = "submitters"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[str] = mapped_column(String(40))


class SuiteRow(Base):
    __tablename__ = "suites"
    __table_args__ = (UniqueConstraint("name", "content_hash"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), index=True)
    content_hash: Mapped[str] = mapped_column(String(128))
    task_ids: Mapped[list[str]] = mapped_column(JSON)
    categories: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    pass_threshold: Mapped[float] = mapped_column(Float, default=1.0)


class SubmissionRow(Base):
    __tablename__ = "submissions"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    suite: Mapped[str] = mapped_column(String(200), index=True)
    suite_hash: Mapped[str] = mapped_column(String(128))
    run_id: Mapped[str] = mapped_column(String(200))
    model: Mapped[str] = mapped_column(String(500))
    harnesses: Mapped[dict[str, str]] = mapped_column(JSON)
    attempts_per_task: Mapped[int] = mapped_column(Integer)
    submitter_id: Mapped[int] = mapped_column(ForeignKey("submitters.id"))
    created_at: Mapped[str] = mapped_column(String(40))
    bundle_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    has_captures: Mapped[bool] = mapped_column(Boolean, default=False)
    evaluation_only: Mapped[bool] = mapped_column(Boolean, default=False)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON)
    manifest: Mapped[dict[str, Any]] = mapped_column(JSON)
    captures: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    """session id -> capture JSONL text (only when the submitter included them)."""
    attempts: Mapped[list[AttemptRow]] = relationship(back_populates="submission", cascade="all, delete-orphan")
    submitter: Mapped[SubmitterRow] = relationship()


class AttemptRow(Base):
    __tablename__ = "attempts"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    submission_id: Mapped[str] = mapped_column(ForeignKey("submissions.id"), index=True)
    task_id: Mapped[str] = mapped_column(String(300))
    harness: Mapped[str] = mapped_column(String(100))
    attempt: Mapped[int] = mapped_column(Integer)
    category: Mapped[str] = mapped_column(String(100))
    status: Mapped[str] = mapped_column(String(20))
    passed: Mapped[bool] = mapped_column(Boolean)
    score: Mapped[float] = mapped_column(Float)
    record: Mapped[dict[str, Any]] = mapped_column(JSON)
    submission: Mapped[SubmissionRow] = relationship(back_populates="attempts")


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Store:
    """Opens the database and creates the tables; hands out sessions."""

    def __init__(self, url: str) -> None:
        self.url = url
        connect_args = {"timeout": 30, "check_same_thread": False} if url.startswith("sqlite") else {}
        self.engine: Engine = create_engine(url, connect_args=connect_args)
        if url.startswith("sqlite"):
            event.listen(self.engine, "connect", _sqlite_pragmas)
        Base.metadata.create_all(self.engine)
        self.session = sessionmaker(self.engine, expire_on_commit=False)

    def add_submitter(self, name: str) -> str:
        """Create a submitter and return its token (shown once; only its hash is stored)."""
        token = "cgl_" + secrets.token_urlsafe(24)
        try:
            with self.session.begin() as s:
                s.add(SubmitterRow(name=name, token_sha256=hash_token(token), created_at=_now()))
        except IntegrityError:
            raise LeaderboardError(f"submitter {name!r} already exists in {self.url}; pick another name "
                                   "(tokens are shown once and cannot be shown again)") from None
        return token

    def submitter_for(self, token: str) -> SubmitterRow | None:
        with self.session() as s:
            return s.scalar(select(SubmitterRow).where(SubmitterRow.token_sha256 == hash_token(token)))

    def add_suite(
        self, name: str, content_hash: str, task_ids: list[str], categories: dict[str, str], pass_threshold: float
    ) -> None:
        """Register a suite version (idempotent)."""
        with self.session.begin() as s:
            row = s.scalar(select(SuiteRow).where(SuiteRow.name == name, SuiteRow.content_hash == content_hash))
            if row is None:
                s.add(SuiteRow(name=name, content_hash=content_hash, task_ids=task_ids, categories=categories,
                               pass_threshold=pass_threshold))

    def suite(self, name: str, content_hash: str) -> SuiteRow | None:
        with self.session() as s:
            return s.scalar(select(SuiteRow).where(SuiteRow.name == name, SuiteRow.content_hash == content_hash))

    def suite_names(self) -> list[str]:
        with self.session() as s:
            return sorted(set(s.scalars(select(SuiteRow.name))))

    def submissions(self, suite: str | None = None) -> list[SubmissionRow]:
        """Submissions with their attempts and submitter loaded (usable after the session closes)."""
        with self.session() as s:
            q = select(SubmissionRow).options(selectinload(SubmissionRow.attempts), selectinload(SubmissionRow.submitter))
            if suite:
                q = q.where(SubmissionRow.suite == suite)
            return list(s.scalars(q.order_by(SubmissionRow.created_at)))

    def submission(self, sub_id: str) -> SubmissionRow | None:
        with self.session() as s:
            row = s.get(SubmissionRow, sub_id)
            if row is not None:
                _ = list(row.attempts), row.submitter  # load before the session closes
            return row

    def count(self) -> tuple[int, int]:
        """(submissions, attempts): used by tests to prove a refusal changed nothing."""
        with self.session() as s:
            return len(list(s.scalars(select(SubmissionRow.id)))), len(list(s.scalars(select(AttemptRow.id))))


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=FULL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()
