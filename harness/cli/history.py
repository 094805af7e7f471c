"""``harness history``: what the run history says about checks and hosts, and why checks flake.

Per check its pass rate over the last N runs and, for each red, whether it was a real failure or
an environment fault; per host its env-fault rate, categories and whether it is getting worse;
for every check that both passed and failed, what its failures follow (a host, a ref, or the
test itself) with the evidence. Exit 0 (a report), 2 when the history cannot be opened.
"""

from __future__ import annotations

import os
from typing import Optional

import typer

from harness.cli.app import app
from harness.cli.common import print_json, usage_error
from harness.core.historyurl import HISTORY_ENV

DEFAULT_LAST = 20
HISTORY_OPTION_HELP = (
    f"The run history: a SQLite file path or a postgresql:// URL (password only as ${{VAR}}) "
    f"(default: ${HISTORY_ENV}, else ~/.local/share/tt-harness/history.sqlite)."
)


def open_history(option: str | None):
    """The history ``--history`` names (or the default), opened and migrated; a problem is a
    one-line message and exit 2."""
    from harness.core.historyurl import default_history_url
    from harness.history.store import History, HistoryError  # SQLAlchemy only for commands that need it

    try:
        return History.open(option if option is not None else default_history_url(), os.environ)
    except HistoryError as exc:
        raise usage_error(f"harness: {exc}")


@app.command("history")
def history_command(
    last: int = typer.Option(DEFAULT_LAST, "--last", min=1, help="How many of the newest runs to look at."),
    check: Optional[str] = typer.Option(None, "--check", help="Only this check (and the runs that ran it)."),
    host: Optional[str] = typer.Option(None, "--host", help="Only this host (and the runs that touched it)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON document for tools instead of tables."),
    history_db: Optional[str] = typer.Option(None, "--history", metavar="DB", help=HISTORY_OPTION_HELP),
) -> None:
    """Pass rates per check, env-fault rates per host, and what flaky checks' failures follow."""
    from harness.core.flakiness import analyze
    from harness.history.store import HistoryError

    store = open_history(history_db)
    try:
        runs = store.runs(last, check=check, host=host)
        cases = store.cases([run.run_id for run in runs], details=False)
    except HistoryError as exc:
        raise usage_error(f"harness: {exc}")
    finally:
        store.close()
    report = analyze(runs, cases, check=check, host=host)
    if as_json:
        print_json({"history": store.display, "last": last, "check": check, "host": host, **report.to_json()})
        return
    typer.echo(render(report, store.display, last, check=check, host=host))


def render(report, display: str, last: int, *, check: str | None = None, host: str | None = None) -> str:
    """The report for people: three tables and the attributions with their evidence."""
    from harness.core.matrix import render_table

    if not report.runs:
        if check or host:
            what = " and ".join(filter(None, (check and f"check {check}", host and f"host {host}")))
            return f"history {display}: no run with {what}"
        return f"history {display}: no runs yet (harness run records every run here)"
    lines = [f"history {display}: {report.runs} run(s) (the last {last} asked), {report.first} .. {report.last}", ""]
    rows = [
        [c.check, str(c.runs), str(c.executions), _percent(c.pass_rate), str(c.failed), str(c.env_faults),
         str(c.errors), str(c.flaky), str(c.skipped)]
        for c in report.checks
    ]
    lines.append(render_table(["check", "runs", "executions", "pass rate", "real fail", "env fault", "error", "flaky", "skip"], rows))
    reds = [(c, c.reds) for c in report.checks if c.reds]
    if reds:
        lines += ["", "reds (newest first):"]
        for stats, found in reds:
            shown = found[:5]
            more = f" (+{len(found) - len(shown)} more)" if len(found) > len(shown) else ""
            lines.append(f"  {stats.check}: " + "; ".join(
                f"{r.kind}{'/' + ','.join(r.categories) if r.categories else ''} on {r.host} in {r.run_id}" for r in shown
            ) + more)
    lines.append("")
    host_rows = [
        [h.host, str(h.executions), _percent(h.env_fault_rate),
         ", ".join(f"{name} {n}" for name, n in h.categories) or "-",
         (f"worse: {_percent(h.older_rate)} -> {_percent(h.newer_rate)}" if h.worse else
          f"{_percent(h.older_rate)} -> {_percent(h.newer_rate)}")]
        for h in report.hosts
    ]
    lines.append(render_table(["host", "executions", "env-fault rate", "categories", "older -> newer half"], host_rows))
    worse = [h.host for h in report.hosts if h.worse]
    if worse:
        lines += ["", f"getting worse: {', '.join(worse)}"]
    if report.attributions:
        lines += ["", "flaky checks (passed and failed in these runs):"]
        for a in report.attributions:
            lines.append(f"  {a.check}: {a.cause}: {a.subject}")
            lines.append(f"    {a.summary}")
            lines += [f"      {line}" for line in a.evidence]
    return "\n".join(lines)


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"
