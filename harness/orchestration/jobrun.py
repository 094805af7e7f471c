"""One job across its hosts: the entry point of a run, and what it leaves on disk.

:func:`run_job` picks the hosts, hands the job to the :class:`~harness.orchestration.scheduler.Scheduler`
and keeps the JUnit feed and ``summary.json`` current through the :class:`ReportWriter` listener:
every check planned on a host appears in that host's suite, run or not, and the files on disk are
always a valid report of what has finished.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Protocol, Sequence

from harness.core import junit
from harness.core.atomic import write_text
from harness.core.errors import InputError
from harness.core.events import CheckFinished, HostQuarantined, Listener, RunFinished
from harness.core.inventory import Host, Inventory
from harness.core.outcomes import Outcome, SuiteResult, exit_code, summarize
from harness.core.spec import JobSpec, secret_masker
from harness.execution.connect import Connections
from harness.orchestration.recorder import HistoryRecorder
from harness.orchestration.scheduler import Options, Scheduler

if TYPE_CHECKING:
    from harness.history.store import History

LineSink = Callable[[str], None]


@dataclass(frozen=True)
class RunReport:
    run_id: str
    job: str
    suites: tuple[SuiteResult, ...]
    started: str
    finished: str
    checks: tuple[str, ...] = ()  # the job's checks, in spec order
    logs: Path | None = None  # each attempt's logs and artifacts, by host and check
    cancelled: bool = False
    history: str = ""  # the history database this run was recorded in ("" when none)
    history_error: str = ""  # why it could not be recorded (the verdicts stand regardless)

    @property
    def outcomes(self) -> list[Outcome]:
        return [case.outcome for suite in self.suites for case in suite.cases]

    @property
    def exit_code(self) -> int:
        return exit_code(self.outcomes)

    def summary(self) -> dict:
        return {
            "run_id": self.run_id,
            "job": self.job,
            "started": self.started,
            "finished": self.finished,
            "exit_code": self.exit_code,
            "cancelled": self.cancelled,
            "counts": dict(summarize(self.outcomes)),
            **({"history": {"database": self.history, "recorded": not self.history_error, "error": self.history_error or None}}
               if self.history else {}),
            "hosts": [
                {
                    "host": suite.host,
                    "quarantined": suite.properties.get("quarantined"),
                    "notes": [v for k, v in suite.properties.items() if k.startswith("note.")],
                    "cases": [
                        {
                            "name": case.name,
                            "classname": case.classname,
                            "check": case.check,
                            "outcome": case.outcome.value,
                            "category": str(case.verdict.category) if case.verdict.category else None,
                            "message": case.verdict.message,
                            "attempts": len(case.attempts),
                        }
                        for case in suite.cases
                    ],
                }
                for suite in self.suites
            ],
        }


def select_hosts(job: JobSpec, inventory: Inventory, names: tuple[str, ...] = ()) -> tuple[Host, ...]:
    """The hosts a job may run on: every label, the right board when it needs one."""
    unknown = [name for name in names if name not in {h.name for h in inventory.hosts}]
    if unknown:
        raise InputError.at(str(inventory.path), 1, 1, f"no host named {unknown[0]!r} in this inventory")
    hosts = inventory.select(job.hosts.labels, names)
    if job.device is not None:
        hosts = tuple(h for h in hosts if job.device.board in h.board_types())
    if not hosts:
        need = f"labels {list(job.hosts.labels)}" + (f" and a {job.device.board}" if job.device else "")
        raise InputError.at(str(job.path), 1, 1, f"no host in {inventory.path} has {need}")
    return hosts


def run_job(
    job: JobSpec,
    inventory: Inventory,
    out_dir: Path,
    *,
    host_names: tuple[str, ...] = (),
    junit_path: Path | None = None,
    on_line: LineSink | None = None,
    on_output: LineSink | None = None,
    root: str = "/",
    environ: Mapping[str, str] | None = None,
    listeners: Sequence[Listener] = (),
    options: Options | None = None,
    started_scheduler: Callable[[Scheduler], None] | None = None,
    history: "History | None" = None,
) -> RunReport:
    """Run ``job`` on its hosts; keep the JUnit feed and ``summary.json`` in ``out_dir`` up to
    date (rewritten atomically as checks finish, so a killed run leaves a valid report of what
    finished), and each attempt's logs and artifacts under ``out_dir/<run id>/<host>/<check>``.
    ``on_line`` gets progress (steps, image builds), ``on_output`` the checks' own output;
    ``started_scheduler`` is handed the scheduler before it runs (to cancel it on a signal);
    ``history``, when given, gets every case of the run when it ends (a failure to write it is
    reported in the report's ``history_error``, never in a verdict or the exit code)."""
    hosts = select_hosts(job, inventory, host_names)
    Connections(inventory).check(hosts)  # a jump loop is an input error before anything runs
    options = options or Options(root=root)

    def scheduler(run_id: str, listeners: tuple[Listener, ...]) -> Scheduler:
        return Scheduler(
            job, inventory, hosts, run_id, out_dir / run_id, listeners=listeners, on_line=on_line,
            on_output=on_output, environ=environ, options=options, now=utc_now,
        )

    return drive(job, hosts, out_dir, scheduler, junit_path=junit_path, environ=environ, listeners=listeners,
                 started_scheduler=started_scheduler, history=history)


class RunSource(Protocol):
    """What runs the checks and knows their results: the SSH scheduler, the Slurm executor."""

    cancelled: bool

    def run(self) -> None: ...
    def suites(self) -> Iterable[SuiteResult]: ...
    def emit(self, event) -> None: ...


def drive(
    job: JobSpec,
    hosts: Sequence[Host],
    out_dir: Path,
    make_source: Callable[[str, tuple[Listener, ...]], RunSource],
    *,
    junit_path: Path | None,
    environ: Mapping[str, str] | None,
    listeners: Sequence[Listener],
    started_scheduler: Callable[[Any], None] | None,
    history: "History | None",
) -> RunReport:
    """One run, whatever executes it: a run id, the report writer and the history recorder as
    listeners of ``make_source(run_id, listeners)``, which runs the checks; the reports written
    at the end whatever happened."""
    run_id = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)
    started = utc_now()
    writer = ReportWriter(out_dir, junit_path, job, run_id, started, environ)
    recorder = HistoryRecorder(history, job, hosts, run_id, started, writer.masker) if history is not None else None
    source = make_source(run_id, (writer, *listeners, *((recorder,) if recorder else ())))
    writer.source = source
    if started_scheduler is not None:
        started_scheduler(source)
    try:
        source.run()
    finally:
        report = writer.write(finished=True)
        source.emit(RunFinished(run_id, report.exit_code, report.cancelled, report.finished))
        if recorder is not None:
            report = dataclasses.replace(report, history=recorder.history.display, history_error=writer.masker.text(recorder.error))
            writer.write_summary(report)
    return report


class ReportWriter:
    """The listener that keeps the JUnit feed and summary.json on disk, rewritten atomically
    after every finished check."""

    def __init__(self, out_dir: Path, junit_path: Path | None, job: JobSpec, run_id: str, started: str, environ):
        self.out_dir = out_dir
        self.junit_path = junit_path or out_dir / "junit.xml"
        self.job = job
        self.run_id = run_id
        self.started = started
        self.masker = secret_masker(job, environ or {})
        self.source: RunSource | None = None
        self._lock = threading.Lock()

    def on_event(self, event) -> None:
        if isinstance(event, (CheckFinished, HostQuarantined)):
            self.write()

    def write(self, finished: bool = False) -> RunReport:
        assert self.source is not None
        with self._lock:
            report = RunReport(
                self.run_id, self.job.name, tuple(self.source.suites()), self.started, utc_now() if finished else "",
                tuple(c.name for c in self.job.checks), self.out_dir / self.run_id, self.source.cancelled,
            )
            self.out_dir.mkdir(parents=True, exist_ok=True)
            junit.write(self.junit_path, report.suites, name=f"tt-harness {self.job.name}", redact=self.masker.values)
            write_text(self.out_dir / "summary.json", json.dumps(self.masker.data(report.summary()), indent=2) + "\n")
            return report

    def write_summary(self, report: RunReport) -> None:
        """summary.json again, for what is known only after the run (the history's answer)."""
        with self._lock:
            write_text(self.out_dir / "summary.json", json.dumps(self.masker.data(report.summary()), indent=2) + "\n")


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
