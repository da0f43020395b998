"""A throwaway PostgreSQL cluster for the store tests (Debian's `postgresql` package, installed by scripts/setup.sh).

The cluster listens only on a unix socket in a temporary folder; each test gets its own database.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}")) or [shutil.which(name) or ""]
    if not found[-1]:
        raise RuntimeError(f"PostgreSQL's {name} is not installed; run `bash scripts/setup.sh` (apt package postgresql)")
    return found[-1]


@contextmanager
def postgres_cluster() -> Iterator[str]:
    """Start a cluster; yield the socket folder. As root the server runs as the package's `postgres` user."""
    root = Path(tempfile.mkdtemp(prefix="clawgym-pg-"))
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_user:
        shutil.chown(root, "postgres")
    data, sock = root / "data", root
    env = {**os.environ, "LC_ALL": "C"}
    try:
        subprocess.run(
            [*as_user, _bin("initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"],
            check=True,
            capture_output=True,
            env=env,
            timeout=120,
        )
        opts = f"-k {sock} -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c max_connections=60"
        subprocess.run(
            [*as_user, _bin("pg_ctl"), "-D", str(data), "-o", opts, "-l", str(root / "log"), "-w", "-t", "60", "start"],
            check=True,
            capture_output=True,
            env=env,
            timeout=90,
        )
        try:
            yield str(sock)
        finally:
            subprocess.run(
                [*as_user, _bin("pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"], capture_output=True, env=env, timeout=60
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def postgres_database(sock: str) -> Iterator[str]:
    """A fresh database in the cluster; yields its SQLAlchemy URL and drops it afterwards."""
    import psycopg

    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(host=sock, user="postgres", dbname="postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield f"postgresql+psycopg://postgres@/{name}?host={sock}"
    finally:
        with psycopg.connect(host=sock, user="postgres", dbname="postgres", autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
