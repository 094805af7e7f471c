"""``harness report [RUN] [--last N] --html PATH [--history DB]``: one self-contained HTML file
about a run (default the newest), with trends over the last N runs of its suite.

Exit status: 0 the report was written; 2 bad input (an output path that is not a file, a history
that cannot be opened, an unknown run, an empty history). The run's own verdicts do not change
it: the report describes a run, it does not run anything.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Optional

import typer

from harness.cli.app import app
from harness.cli.common import usage_error

MAX_LAST = 1000  # a trend window larger than this is a different question than a report answers


@app.command("report")
def report_command(
    run: Optional[str] = typer.Argument(None, metavar="RUN", help="A run id (see `harness history`); default the newest run."),
    last: int = typer.Option(20, "--last", min=1, max=MAX_LAST, metavar="N", help="Trends over the last N runs of the run's suite, up to the run."),
    html: Path = typer.Option(..., "--html", metavar="PATH", help="Write the report here: one self-contained HTML file (put it in the run's output folder and its log links work)."),
    history: Optional[str] = typer.Option(None, "--history", metavar="DB", help="The run history: a file path (SQLite) or a postgresql:// URL; default $TT_HARNESS_HISTORY, else history.sqlite in the user's data folder."),
) -> None:
    """Write one self-contained HTML report of a run: host x check matrix, evidence, trends."""
    from harness.core.atomic import write_text
    from harness.core.files import OutputError, check_output
    from harness.core.historyurl import default_history_url
    from harness.core.report_html import render_report

    try:
        check_output(html, "--html")
    except OutputError as exc:
        raise usage_error(str(exc))
    url = history or default_history_url()
    chosen, window, cases = _read(url, _masker(url), run, last)
    generated = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    page = render_report(chosen, [c for c in cases if c.run_id == chosen.run_id], window, cases, generated=generated)
    try:
        write_text(html, page)
    except OutputError as exc:
        raise usage_error(str(exc))
    except OSError as exc:
        raise usage_error(f"--html {html}: cannot write: {exc.strerror or exc}")
    hosts = len({c.host for c in cases if c.run_id == chosen.run_id})
    checks = len({c.check for c in cases if c.run_id == chosen.run_id})
    typer.echo(
        f"{html}: {chosen.suite} run {chosen.run_id}: {hosts} host(s) x {checks} check(s), "
        f"trends over {len(window)} run(s)"
    )


def _read(url: str, masker, run_id: str | None, last: int):
    """The chosen run, the trend window (newest first, ending at the run) and their cases."""
    try:
        from harness.history.store import History, HistoryError  # SQLAlchemy and a driver only for this command
    except ImportError as exc:
        raise usage_error(f"--history: the history store cannot be loaded ({exc}): reinstall tt-harness")

    shown = masker.text(url)
    if "://" not in url and not Path(url).expanduser().exists():
        # Opening would create an empty history: a report only reads one.
        raise usage_error(f"--history {shown}: no history there yet (`harness run --history` records runs)")
    try:
        store = History.open(url)
    except HistoryError as exc:  # already one line naming the history, password hidden
        raise usage_error(f"harness: {masker.text(_reason(exc))}")
    except Exception as exc:  # noqa: BLE001  any way a history fails to open is bad input here
        raise usage_error(f"--history {shown}: cannot open: {masker.text(_reason(exc))}")
    try:
        if run_id is None:
            newest = store.runs(last=1)
            if not newest:
                raise usage_error(f"--history {shown}: no runs recorded yet (`harness run` records them)")
            chosen = newest[0]
            suite_runs = store.runs(last=last, suite=chosen.suite)
        else:
            # The run may be old: find it, then take the window of its suite that ends at it.
            every = store.runs()
            chosen = next((r for r in every if r.run_id == run_id), None)
            if chosen is None:
                raise usage_error(f"--history {shown}: no run {run_id!r} (`harness history` lists the runs)")
            suite_runs = [r for r in every if r.suite == chosen.suite]
        position = next((i for i, r in enumerate(suite_runs) if r.run_id == chosen.run_id), None)
        window = suite_runs[position:position + last] if position is not None else [chosen]
        cases = store.cases([r.run_id for r in window])
    except typer.Exit:
        raise
    except HistoryError as exc:
        raise usage_error(f"harness: {masker.text(_reason(exc))}")
    except Exception as exc:  # noqa: BLE001  a history that cannot be read is reported, never a traceback
        raise usage_error(f"--history {shown}: cannot read: {masker.text(_reason(exc))}")
    finally:
        try:
            store.close()
        except Exception:  # noqa: BLE001  closing after a failed read must not hide why it failed
            pass
    return chosen, window, cases


def _masker(url: str):
    """Masks the password of a ``postgresql://user:password@host/db`` URL wherever it shows."""
    from urllib.parse import unquote, urlsplit

    from harness.core.secretref import Masker

    try:
        password = urlsplit(url).password if "://" in url else None
    except ValueError:
        password = None
    return Masker([password, unquote(password)] if password else [])


def _reason(exc: BaseException) -> str:
    """One line, never a traceback: the first line of the exception's text."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
