"""The run history database: one code path for SQLite (embedded default) and PostgreSQL (a lab
where several orchestrators share one history), through SQLAlchemy Core.

``History.open`` takes a path (SQLite) or a ``postgresql://`` URL and brings the schema to the
newest revision with Alembic. Concurrent writers lose nothing: PostgreSQL takes an advisory lock
for migrations and upserts rows (``ON CONFLICT``); SQLite runs in WAL mode, every write
transaction starts with ``BEGIN IMMEDIATE`` (a writer waits for the lock up to the busy timeout
instead of failing on a lock upgrade halfway through), and the same upserts make a repeated
``record`` of a run idempotent.

Every problem opening or using the database is a :class:`HistoryError` with one line that names
the database (password hidden) and what to do; never a driver traceback.
"""

from __future__ import annotations

import json
import os
import re
import stat
import time
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from sqlalchemy import create_engine, event, inspect, select, text
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from harness.core.outcomes import Outcome
from harness.core.records import CaseRecord, RunInfo
from harness.core.secretref import secret_name
from harness.history.schema import cases as cases_table
from harness.history.schema import runs as runs_table

HEAD = "0001"  # the newest migration; a test holds it equal to Alembic's head
KNOWN_REVISIONS = frozenset({"0001"})
BUSY_TIMEOUT_S = 30.0  # how long a SQLite writer waits for another's lock
CONNECT_TIMEOUT_S = 10  # PostgreSQL: an unreachable server is an error, not a hang
MIGRATION_LOCK = 0x7474_6869  # pg_advisory_xact_lock key ("tthi"): one migrator at a time
CHUNK = 500  # rows (or run ids) per statement: under every backend's parameter limit
SQLITE_MAGIC = b"SQLite format 3\x00"
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_WRITE = {"tt_harness_write": True}


class HistoryError(Exception):
    """The history cannot be opened, read or written; the message is one line for a person."""


class History:
    """The run history. Open with :meth:`open`; close with :meth:`close` (or ``with``)."""

    def __init__(self, engine: Engine, display: str):
        self._engine = engine
        self.display = display  # the database, for messages: a path, or a URL without password

    # -- opening ------------------------------------------------------------------------------
    @classmethod
    def open(cls, url: str | os.PathLike, environ: Mapping[str, str] | None = None) -> "History":
        """A path -> SQLite (created 0600 in a 0700 folder when missing); ``postgresql://...``
        -> PostgreSQL (``${VAR}`` in the URL read from ``environ``, default ``os.environ``).
        Runs the migrations to the newest revision."""
        environ = os.environ if environ is None else environ
        raw = os.fspath(url)
        if not raw.strip():
            raise HistoryError("--history is empty: give a file path or a postgresql:// URL")
        if _is_url(raw):
            engine, display = _postgres_engine(raw, environ)
        else:
            engine, display = _sqlite_engine(Path(raw).expanduser())
        history = cls(engine, display)
        try:
            history._migrate()
        except HistoryError:
            engine.dispose()
            raise
        except (SQLAlchemyError, OSError) as exc:
            engine.dispose()
            raise HistoryError(f"history {display}: cannot open: {_reason(exc)}") from None
        return history

    def _migrate(self) -> None:
        with self._engine.connect() as conn:
            current = _revision(conn)
            if current == HEAD:
                return  # the usual case: no Alembic import, no write lock
            _check_revision(current, conn, self.display)
        with self._engine.connect().execution_options(**_WRITE) as conn, conn.begin():
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
            current = _revision(conn)  # another process may have migrated while we waited
            _check_revision(current, conn, self.display)
            if current != HEAD:
                from alembic import command  # only the first open of a database pays for Alembic
                from alembic.config import Config

                config = Config()
                config.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
                config.attributes["connection"] = conn
                command.upgrade(config, "head")

    # -- writing ------------------------------------------------------------------------------
    def record(self, run: RunInfo, cases: Sequence[CaseRecord]) -> None:
        """Store a run and its cases; recording the same (run_id, job, check, case, host) again
        replaces the row, so a repeated or resumed record never duplicates."""
        rows: dict[tuple, dict] = {}
        for case in cases:
            rows[(case.run_id, case.job, case.check, case.case, case.host)] = _case_row(case)
        run_row = {
            "run_id": run.run_id, "suite": run.suite, "started": run.started, "finished": run.finished,
            "exit_code": run.exit_code, "image_digest": run.image_digest, "ref": run.ref,
        }

        def write() -> None:
            with self._engine.connect().execution_options(**_WRITE) as conn, conn.begin():
                insert = _insert(conn)
                conn.execute(_upsert(insert, runs_table, ["run_id"]), [run_row])
                batch = list(rows.values())
                for start in range(0, len(batch), CHUNK):
                    conn.execute(
                        _upsert(insert, cases_table, ["run_id", "job", "check_name", "case_name", "host"]),
                        batch[start:start + CHUNK],
                    )

        self._retrying(write, "record run " + run.run_id)

    # -- reading ------------------------------------------------------------------------------
    def runs(
        self, last: int | None = None, suite: str | None = None, *, check: str | None = None, host: str | None = None
    ) -> list[RunInfo]:
        """Runs, newest first: the last ``last`` (all when None) of ``suite`` (any when None);
        ``check``/``host``: only runs that ran that check / ran anything on that host."""
        query = select(runs_table).order_by(runs_table.c.started.desc(), runs_table.c.run_id.desc())
        if suite is not None:
            query = query.where(runs_table.c.suite == suite)
        if check is not None:
            query = query.where(runs_table.c.run_id.in_(select(cases_table.c.run_id).where(cases_table.c.check_name == check)))
        if host is not None:
            query = query.where(runs_table.c.run_id.in_(select(cases_table.c.run_id).where(cases_table.c.host == host)))
        if last is not None:
            query = query.limit(max(0, int(last)))

        def read() -> list[RunInfo]:
            with self._engine.connect() as conn:
                return [
                    RunInfo(r.run_id, r.suite, r.started, r.finished, r.exit_code, r.image_digest, r.ref)
                    for r in conn.execute(query)
                ]

        return self._retrying(read, "read runs")

    def cases(self, run_ids: Sequence[str], *, details: bool = True) -> list[CaseRecord]:
        """Every case of these runs (ordered by run, host, check, case). ``details=False``
        leaves out message, evidence and log: what pass rates and attribution need, read faster."""
        ids = list(dict.fromkeys(run_ids))
        c = cases_table.c
        columns = [c.run_id, c.job, c.check_name, c.case_name, c.host, c.outcome, c.category, c.board, c.device,
                   c.image_digest, c.ref, c.duration, c.attempt]
        if details:
            columns += [c.message, c.evidence, c.log]
        outcomes = {o.value: o for o in Outcome}

        def read() -> list[CaseRecord]:
            found: list[CaseRecord] = []
            with self._engine.connect() as conn:
                for start in range(0, len(ids), CHUNK):
                    query = (
                        select(*columns).where(c.run_id.in_(ids[start:start + CHUNK]))
                        .order_by(c.run_id, c.host, c.check_name, c.case_name)
                    )
                    rows = conn.execute(query).all()  # one fetchall: row by row costs twice as much
                    if details:
                        found += [
                            CaseRecord(r[0], r[1], r[2], r[3], r[4], outcomes[r[5]], r[6], r[7], r[8], r[9], r[10], r[11],
                                       r[12], r[13], tuple(json.loads(r[14] or "[]")), r[15])
                            for r in rows
                        ]
                    else:
                        found += [
                            CaseRecord(r[0], r[1], r[2], r[3], r[4], outcomes[r[5]], r[6], r[7], r[8], r[9], r[10], r[11], r[12])
                            for r in rows
                        ]
            return found

        return self._retrying(read, "read cases")

    def count(self) -> tuple[int, int]:
        """(runs, cases) in the whole history: the baseline the benchmark compares with."""
        with self._engine.connect() as conn:
            runs = conn.execute(text("SELECT COUNT(*) FROM runs")).scalar_one()
            cases = conn.execute(text("SELECT COUNT(*) FROM cases")).scalar_one()
        return int(runs), int(cases)

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> "History":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _retrying(self, work, what: str):
        """SQLite's busy timeout covers waiting for a lock; a "database is locked" past it (or a
        WAL checkpoint race) is retried a few times before it becomes a HistoryError."""
        for attempt in range(5):
            try:
                return work()
            except SQLAlchemyError as exc:
                if "locked" in str(exc).lower() and attempt < 4:
                    time.sleep(0.2 * (attempt + 1))
                    continue
                raise HistoryError(f"history {self.display}: cannot {what}: {_reason(exc)}") from None
            except OSError as exc:
                raise HistoryError(f"history {self.display}: cannot {what}: {_reason(exc)}") from None
        raise AssertionError("unreachable")


# -- engines ------------------------------------------------------------------------------------


def _is_url(raw: str) -> bool:
    return bool(re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", raw))


def _postgres_engine(raw: str, environ: Mapping[str, str]) -> tuple[Engine, str]:
    scheme = raw.split("://", 1)[0].lower()
    if scheme not in ("postgresql", "postgres", "postgresql+psycopg"):
        raise HistoryError(
            f"--history {scheme}://...: not a database this harness keeps history in; "
            "give a file path (SQLite) or a postgresql:// URL"
        )
    try:
        url = make_url("postgresql+psycopg://" + raw.split("://", 1)[1])
    except (ArgumentError, ValueError) as exc:
        raise HistoryError(f"--history: not a valid postgresql:// URL: {_reason(exc)}") from None
    if url.password is not None:
        name = secret_name(str(url.password))
        if name is None:
            raise HistoryError(
                "--history: the URL holds a password; name it as ${VAR} "
                "(postgresql://user:${PGPASS_VAR}@host/db) or use PGPASSWORD or ~/.pgpass"
            )
        if name not in environ:
            raise HistoryError(f"--history: the URL's password ${{{name}}} is not set in the environment")
        url = url.set(password=environ[name])
    for part in (url.username, url.host, url.database):
        if part and _VAR.search(part):
            raise HistoryError("--history: only the password of a postgresql:// URL may be a ${VAR}")
    display = url.render_as_string(hide_password=True).replace("postgresql+psycopg://", "postgresql://", 1)
    engine = create_engine(url, connect_args={"connect_timeout": CONNECT_TIMEOUT_S}, pool_pre_ping=False)
    return engine, display


def _sqlite_engine(path: Path) -> tuple[Engine, str]:
    display = str(path)
    _prepare_sqlite_file(path, display)
    engine = create_engine(URL.create("sqlite", database=str(path)), connect_args={"timeout": BUSY_TIMEOUT_S})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:
        # SQLAlchemy, not the sqlite3 module, decides where a transaction begins (below).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        cursor.execute("PRAGMA journal_mode = WAL")  # readers never block the writer, nor it them
        cursor.execute("PRAGMA synchronous = NORMAL")  # durable at checkpoints; safe with WAL
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:
        # A writer takes the write lock up front: a deferred transaction that reads and then
        # writes can fail with SQLITE_BUSY at once (no busy wait) when another writer got in.
        immediate = conn.get_execution_options().get("tt_harness_write")
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine, display


def _prepare_sqlite_file(path: Path, display: str) -> None:
    """An existing database must be a regular SQLite file; a new one is created 0600 in a folder
    created 0700, so the history of a lab is not readable by every user of the machine."""
    try:
        info = path.stat()
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise HistoryError(f"history {display}: cannot open: {_reason(exc)}") from None
    if info is not None:
        if not stat.S_ISREG(info.st_mode):
            raise HistoryError(f"history {display}: not a regular file; give the path of a SQLite file (new or existing)")
        if info.st_size:
            try:
                with open(path, "rb") as handle:
                    head = handle.read(len(SQLITE_MAGIC))
            except OSError as exc:
                raise HistoryError(f"history {display}: cannot read: {_reason(exc)}") from None
            if head != SQLITE_MAGIC:
                raise HistoryError(f"history {display}: not a SQLite database; give a new path or a tt-harness history")
        if not os.access(path, os.R_OK | os.W_OK):
            raise HistoryError(f"history {display}: not writable by this user")
        return
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
    except FileExistsError:
        pass  # another process created it just now: it migrates, we wait for its lock
    except OSError as exc:
        raise HistoryError(f"history {display}: cannot create: {_reason(exc)}") from None


def _revision(conn) -> str | None:
    if not inspect(conn).has_table("alembic_version"):
        return None
    return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def _check_revision(current: str | None, conn, display: str) -> None:
    if current is not None and current not in KNOWN_REVISIONS:
        raise HistoryError(
            f"history {display}: schema revision {current} is newer than this tt-harness knows; upgrade tt-harness"
        )
    if current is None:
        tables = [t for t in inspect(conn).get_table_names() if t not in ("runs", "cases")]
        if tables:
            raise HistoryError(
                f"history {display}: a database of something else (tables {', '.join(sorted(tables)[:3])}); "
                "give a new path or a tt-harness history"
            )


def _insert(conn):
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert


def _upsert(insert, table, keys: Iterable[str]):
    statement = insert(table)
    keys = list(keys)
    return statement.on_conflict_do_update(
        index_elements=keys, set_={c.name: statement.excluded[c.name] for c in table.columns if c.name not in keys}
    )


def _case_row(case: CaseRecord) -> dict:
    return {
        "run_id": case.run_id, "job": case.job, "check_name": case.check, "case_name": case.case, "host": case.host,
        "outcome": Outcome(case.outcome).value, "category": case.category, "board": case.board, "device": case.device,
        "image_digest": case.image_digest, "ref": case.ref, "duration": float(case.duration), "attempt": int(case.attempt),
        "message": case.message, "evidence": json.dumps(list(case.evidence)), "log": case.log,
    }


def _reason(exc: BaseException) -> str:
    """The first line of what the driver said, without SQLAlchemy's background links."""
    original = getattr(exc, "orig", None) or exc
    if isinstance(original, OSError) and original.strerror:
        return original.strerror  # the path is already in the message
    lines = [line.strip() for line in str(original).strip().splitlines() if line.strip()]
    reason = lines[0] if lines else type(original).__name__
    return reason[:300]
