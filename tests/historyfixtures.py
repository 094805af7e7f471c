"""History fixtures: a real PostgreSQL server owned by the tests, and a fresh history database
per test on each backend.

``postgres_server`` (session) starts a throwaway cluster from Debian's ``postgresql`` binaries
(``initdb`` + ``pg_ctl``, as the ``postgres`` user when the tests run as root) in a temporary
folder, on a free loopback port, with trust authentication for loopback only; it FAILS, never
skips, when it cannot start. ``history_url`` gives each test a new, empty database:
parametrized over ``sqlite`` and ``postgresql`` so the same test runs on both.

Every test also gets ``$TT_HARNESS_HISTORY`` pointed at a throwaway file, so a ``harness run``
in a test never writes into the user's own history.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from harness.core.historyurl import HISTORY_ENV


@pytest.fixture(autouse=True)
def _isolated_history(tmp_path_factory, monkeypatch):
    monkeypatch.setenv(HISTORY_ENV, str(tmp_path_factory.mktemp("history") / "history.sqlite"))


def _pg_bindir() -> Path:
    found = shutil.which("pg_ctl")
    if found:
        return Path(os.path.realpath(found)).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(p.split("/")[4]))
    if not versions:
        pytest.fail("PostgreSQL is not installed (Debian's `postgresql`; scripts/test installs it)")
    return Path(versions[-1]).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def postgres_server():
    """``postgresql://postgres@127.0.0.1:PORT``: a server for this test session only."""
    bindir = _pg_bindir()
    root = Path(tempfile.mkdtemp(prefix="tt-harness-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root: the cluster belongs to the postgres user
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            pytest.fail("running as root, but there is no `postgres` user to own a test cluster")
        os.chown(root, user.pw_uid, user.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    data, log, port = root / "data", root / "server.log", _free_port()

    def run(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([*as_user, *argv], capture_output=True, text=True, timeout=120)

    done = run(str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync")
    if done.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"initdb failed: {done.stderr.strip()[-2000:]}")
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=60"
    done = run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w", "-t", "60", "start")
    if done.returncode != 0:
        text = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"PostgreSQL did not start: {done.stderr.strip()[-1000:]}\n{text}")
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}"
    finally:
        run(str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)


def new_postgres_database(server: str) -> str:
    """A new empty database on ``server``; its URL."""
    import psycopg

    name = "history_" + secrets.token_hex(6)
    with psycopg.connect(f"{server}/postgres", autocommit=True, connect_timeout=10) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{server}/{name}"


@pytest.fixture(params=["sqlite", "postgresql"])
def history_url(request, tmp_path) -> str:
    """A fresh history database: a SQLite path, or a PostgreSQL URL on the session's server."""
    if request.param == "sqlite":
        return str(tmp_path / "db" / "history.sqlite")
    return new_postgres_database(request.getfixturevalue("postgres_server"))
