"""The history store on both backends: SQLite files and a real PostgreSQL server (the
``postgres_server`` fixture starts one; these tests fail, never skip, without it)."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
import textwrap
import time

import pytest
from typer.testing import CliRunner

import harness.cli  # noqa: F401  (registers the commands)
from harness.cli.app import app
from harness.core.outcomes import Outcome
from harness.core.records import CaseRecord, RunInfo
from harness.history.store import HEAD, History, HistoryError

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def a_run(run_id: str, started: str, suite: str = "nightly", **kw) -> RunInfo:
    return RunInfo(run_id, suite, started, kw.pop("finished", started), kw.pop("exit_code", 0), **kw)


def a_case(run_id: str, check: str = "smoke", case: str = "Smoke.Open", host: str = "wh-01", outcome=Outcome.PASS, **kw) -> CaseRecord:
    return CaseRecord(run_id, "nightly", check, case, host, outcome, **kw)


def test_a_run_and_its_cases_come_back_as_recorded(history_url):
    with History.open(history_url) as history:
        run = a_run("r1", "2026-11-01T00:00:00+00:00", exit_code=3, image_digest="sha256:abc", ref="84f83fcf55")
        cases = [
            a_case("r1", board="n150", device="0", image_digest="sha256:abc", ref="84f83fcf55", duration=1.5, attempt=2,
                   message="passed", evidence=("12: ok",), log="r1/wh-01/smoke"),
            a_case("r1", check="bw", case="LayerNorm.BugRepro_1", outcome=Outcome.ENV_FAULT, category="hugepages",
                   message="no 1G hugepages", evidence=("3: /dev/hugepages-1G missing [hugepages]", "4: more")),
        ]
        history.record(run, cases)
        assert history.runs() == [run]
        assert sorted(history.cases(["r1"]), key=lambda c: c.check) == sorted(cases, key=lambda c: c.check)
        slim = {c.check: c for c in history.cases(["r1"], details=False)}
        assert slim["bw"].category == "hugepages" and slim["bw"].evidence == () and slim["bw"].message == ""


def test_recording_a_run_again_replaces_rows_instead_of_adding(history_url):
    with History.open(history_url) as history:
        history.record(a_run("r1", "2026-11-01T00:00:00+00:00", exit_code=None), [a_case("r1", outcome=Outcome.FAIL)])
        history.record(a_run("r1", "2026-11-01T00:00:00+00:00", exit_code=1),
                       [a_case("r1", outcome=Outcome.PASS), a_case("r1", outcome=Outcome.PASS), a_case("r1", host="wh-02")])
        assert history.count() == (1, 2)
        assert history.runs()[0].exit_code == 1
        assert {(c.host, c.outcome) for c in history.cases(["r1"])} == {("wh-01", Outcome.PASS), ("wh-02", Outcome.PASS)}


def test_runs_are_newest_first_and_filtered_by_last_suite_check_and_host(history_url):
    with History.open(history_url) as history:
        for i in range(6):
            run_id = f"r{i}"
            history.record(
                a_run(run_id, f"2026-11-0{i + 1}T00:00:00+00:00", suite="nightly" if i % 2 else "smoke"),
                [a_case(run_id, check="bw" if i < 3 else "smoke", host=f"wh-0{i % 3}")],
            )
        assert [r.run_id for r in history.runs()] == ["r5", "r4", "r3", "r2", "r1", "r0"]
        assert [r.run_id for r in history.runs(last=2)] == ["r5", "r4"]
        assert [r.run_id for r in history.runs(suite="nightly")] == ["r5", "r3", "r1"]
        assert [r.run_id for r in history.runs(last=2, check="bw")] == ["r2", "r1"]
        assert [r.run_id for r in history.runs(host="wh-00")] == ["r3", "r0"]
        assert history.runs(last=0) == []


def test_cases_of_more_runs_than_one_statement_takes(history_url):
    with History.open(history_url) as history:
        for i in range(1203):
            history.record(a_run(f"r{i:05d}", f"2026-11-01T00:{i // 60:02d}:{i % 60:02d}+00:00"), [a_case(f"r{i:05d}")])
        runs = history.runs()
        assert len(runs) == 1203 and runs[0].run_id == "r01202"
        assert len(history.cases([r.run_id for r in runs], details=False)) == 1203


def test_the_migrated_schema_is_the_schema_the_queries_use(history_url):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from alembic.script import ScriptDirectory
    from alembic.config import Config

    from harness.history.schema import metadata

    config = Config()
    config.set_main_option("script_location", os.path.join(REPO, "harness", "history", "migrations"))
    assert ScriptDirectory.from_config(config).get_current_head() == HEAD
    history = History.open(history_url)
    try:
        with history._engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), metadata) == []
            assert conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar() == HEAD
    finally:
        history.close()


def test_a_new_sqlite_history_is_private_and_in_wal_mode(tmp_path):
    path = tmp_path / "new" / "history.sqlite"
    History.open(path).close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


WRITER = textwrap.dedent("""
    import sys
    from harness.core.outcomes import Outcome
    from harness.core.records import CaseRecord, RunInfo
    from harness.history.store import History
    url, who, runs, cases = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    sys.stdout.write("ready\\n"); sys.stdout.flush(); sys.stdin.readline()  # all start together
    history = History.open(url)  # a fresh database: every writer races to migrate it
    for r in range(runs):
        run_id = f"{who}-{r}"
        history.record(
            RunInfo(run_id, "nightly", f"2026-11-01T00:00:{r:02d}+00:00"),
            [CaseRecord(run_id, "nightly", f"check{c % 5}", f"case{c}", f"wh-{c % 3}", Outcome.PASS) for c in range(cases)],
        )
    history.close()
""")


def test_concurrent_writers_lose_nothing(history_url):
    """Six processes open the same new database at once (racing to create its schema), then
    each records 15 runs of 40 cases at the same time as the others."""
    writers, runs, cases = 6, 15, 40
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, history_url, f"w{i}", str(runs), str(cases)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
        for i in range(writers)
    ]
    for proc in procs:
        assert proc.stdout.readline() == "ready\n"
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    with History.open(history_url) as history:
        assert history.count() == (writers * runs, writers * runs * cases)
        got = history.runs()
        assert {r.run_id for r in got} == {f"w{i}-{r}" for i in range(writers) for r in range(runs)}


# -- bad histories: one line, exit 2, never a traceback -------------------------------------------


def test_a_file_that_is_not_a_database_is_refused(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello\n" * 100)
    with pytest.raises(HistoryError, match="notes.txt: not a SQLite database"):
        History.open(path)
    assert path.read_text() == "hello\n" * 100


def test_a_folder_and_a_path_under_a_file_are_refused(tmp_path):
    with pytest.raises(HistoryError, match="not a regular file"):
        History.open(tmp_path)
    (tmp_path / "file").write_text("x")
    with pytest.raises(HistoryError, match="history.sqlite: cannot open: Not a directory$"):
        History.open(tmp_path / "file" / "history.sqlite")


def test_another_programs_sqlite_database_is_not_taken_over(tmp_path):
    path = tmp_path / "app.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE accounts (id INTEGER)")
    with pytest.raises(HistoryError, match="a database of something else .*accounts"):
        History.open(path)


def test_a_newer_schema_is_named_not_downgraded(tmp_path):
    path = tmp_path / "h.sqlite"
    History.open(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(HistoryError, match="schema revision 9999 is newer"):
        History.open(path)


def test_an_unreachable_postgresql_server_is_an_error_not_a_hang():
    with socket_closed_port() as port:
        started = time.monotonic()
        with pytest.raises(HistoryError, match=rf"postgresql://nobody@127.0.0.1:{port}/history: cannot open"):
            History.open(f"postgresql://nobody@127.0.0.1:{port}/history")
        assert time.monotonic() - started < 15


def test_postgresql_passwords_only_as_variables(postgres_server):
    with pytest.raises(HistoryError, match=r"holds a password; name it as \$\{VAR\}"):
        History.open("postgresql://ci:hunter2@127.0.0.1:1/history")
    with pytest.raises(HistoryError, match=r"\$\{HIST_PW\} is not set"):
        History.open("postgresql://ci:${HIST_PW}@127.0.0.1:1/history", environ={})
    # Trust authentication ignores the password; what matters is that it is read and never shown.
    url = postgres_server.replace("postgres@", "postgres:${HIST_PW}@") + "/postgres"
    with History.open(url, environ={"HIST_PW": "s3cr3t-value"}) as history:
        assert "s3cr3t-value" not in history.display and "***" in history.display


def test_other_url_schemes_are_refused():
    with pytest.raises(HistoryError, match="mysql://...: not a database this harness keeps history in"):
        History.open("mysql://db/history")


@pytest.mark.parametrize("bad", ["notes", "folder", "unreachable", "password", "scheme"])
def test_the_cli_says_what_is_wrong_with_history_in_one_line_and_exits_2(tmp_path, bad):
    target = {
        "notes": str(tmp_path / "notes.txt"),
        "folder": str(tmp_path),
        "unreachable": "postgresql://nobody@127.0.0.1:9/history",
        "password": "postgresql://ci:pw@db.lab/history",
        "scheme": "redis://db/0",
    }[bad]
    (tmp_path / "notes.txt").write_text("not a database\n")
    for args in (["history", "--history", target], ["history", "--json", "--history", target]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("harness: ") and "Traceback" not in result.output
        assert "pw@" not in result.stderr


def test_run_with_a_bad_history_exits_2_before_anything_runs(tmp_path):
    (tmp_path / "notes.txt").write_text("not a database\n")
    result = CliRunner().invoke(app, ["run", os.path.join(REPO, "jobs", "device-smoke.yaml"), "--out", str(tmp_path / "out"),
                                      "--history", str(tmp_path / "notes.txt")])
    assert result.exit_code == 2
    assert "not a SQLite database" in result.stderr and not (tmp_path / "out" / "summary.json").exists()


class socket_closed_port:
    """A loopback port nothing listens on (bound, then closed)."""

    def __enter__(self) -> int:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    def __exit__(self, *exc) -> None:
        pass


def test_history_json_of_an_empty_history(history_url):
    result = CliRunner().invoke(app, ["history", "--json", "--history", history_url])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["runs"] == 0 and document["checks"] == [] and document["flaky"] == []
