"""``harness run``: run a job's checks on lab hosts and write the JUnit feed."""

from __future__ import annotations

import contextlib
import datetime
import os
import signal
import sys
from pathlib import Path
from typing import List, Optional

import typer

from harness.cli.app import app
from harness.cli.history import HISTORY_OPTION_HELP, open_history
from harness.cli.common import INVENTORY_ENV, LAB_OPTION_HELP, fail_input, resolve_inventory, split_names, usage_error
from harness.core.errors import InputError
from harness.core.files import OutputError, check_output, check_output_dir
from harness.core.inventory import load_inventory
from harness.core.matrix import matrix, render_table
from harness.core.outcomes import EXIT_LOCKED
from harness.core.spec import load_job, secret_masker
from harness.core.lease import DEFAULT_WAIT as DEFAULT_LEASE_WAIT

@app.command("run")
def run(
    job_path: Path = typer.Argument(..., metavar="JOB", help="A job spec."),
    inventory: Optional[Path] = typer.Option(None, "--inventory", "-i", help=f"The lab inventory (default: ${INVENTORY_ENV}, else configs/local.yaml)."),
    lab_name: Optional[str] = typer.Option(None, "--lab", help=LAB_OPTION_HELP),
    hosts: Optional[List[str]] = typer.Option(None, "--hosts", help="Only these hosts: names, comma-separated or the option repeated."),
    junit_path: Optional[Path] = typer.Option(None, "--junit", help="Where to write the JUnit feed (default: OUT/junit.xml)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Reports and logs (default: out/<job>)."),
    root: str = typer.Option("/", "--root", help="Read hosts' /sys, /dev and /proc under this folder: anything but / is a STAND-IN host tree (tests, the simulated lab)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress lines (steps and image builds)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Also stream each check's own output as it runs (it is always in the logs)."),
    lease_wait: float = typer.Option(DEFAULT_LEASE_WAIT, "--lease-wait", min=0, help="Seconds a check waits for a card another run holds, then env_fault/device-busy."),
    quarantine_after: int = typer.Option(2, "--quarantine-after", min=1, help="Environment faults after which a host runs nothing more in this run."),
    lock_wait: float = typer.Option(0.0, "--lock-wait", min=0, help=f"Seconds to wait while another run of this job holds OUT's run lock (default 0: exit {EXIT_LOCKED} at once, nothing run). A lock left by a killed run is reported and taken over."),
    keep: Optional[int] = typer.Option(None, "--keep", min=1, help="Keep only the N newest run folders of this job under OUT (only folders the harness made; default: keep all)."),
    history_db: Optional[str] = typer.Option(None, "--history", metavar="DB", help=HISTORY_OPTION_HELP),
    slurm_cluster: Optional[str] = typer.Option(None, "--slurm", metavar="CLUSTER", help="Submit each check to this Slurm cluster of the inventory (`slurm:`) instead of running it over SSH; same JUnit and summary."),
) -> None:
    """Run a job on its hosts: preflight, build and deliver the image, run every check, write JUnit.

    Each check runs in a container with the device profile's mounts; the JUnit feed and
    summary.json tell real failures from environment faults. Exit 0 all passed, 1 a real
    failure or xpass, 2 bad input (nothing ran), 3 environment faults only, 4 another run of
    this job holds OUT's run lock (nothing ran).
    """
    # Docker, SSH and the scheduler load only when a run starts: every other command starts fast.
    from harness.orchestration.jobrun import run_job
    from harness.orchestration.progress import ConsoleProgress
    from harness.orchestration.retention import RunMarker
    from harness.orchestration.scheduler import Options

    try:
        job = load_job(job_path)
        out_dir = out or Path("out") / job.name
        # Every output is checked before anything runs: a wrong path must not cost a run.
        check_output_dir(out_dir, "--out")
        check_output(junit_path or out_dir / "junit.xml", "--junit")
        check_output(out_dir / "summary.json", "summary")
        history = open_history(history_db)  # a bad --history is exit 2 before anything runs
        # The run lock comes before the inventory: a second run must not even bring a lab up.
        with _run_lock(out_dir, job.name, lock_wait):
            if slurm_cluster is not None and lab_name is not None and inventory is None:
                _lab_with_slurm(lab_name)  # --lab sim --slurm sim: the lab comes up with its cluster
            lab = load_inventory(resolve_inventory(inventory, lab_name))
            names = split_names(hosts or [])
            console = None if quiet else ConsoleProgress()
            say = console.say if console is not None else None
            options = Options(lease_wait=lease_wait, quarantine_after=quarantine_after, root=root)
            listeners = (RunMarker(out_dir),) if console is None else (RunMarker(out_dir), console)
            with _cancelled_by_signals() as caught:
                if slurm_cluster is not None:
                    from harness.orchestration.slurmrun import SlurmError, run_slurm_job

                    try:
                        report = run_slurm_job(
                            job, lab, slurm_cluster, out_dir, host_names=names, junit_path=junit_path, on_line=say,
                            environ=dict(os.environ), listeners=listeners, options=options,
                            started_scheduler=caught.watch, history=history,
                        )
                    except SlurmError as exc:
                        raise usage_error(str(exc))
                else:
                    report = run_job(
                        job, lab, out_dir, host_names=names, junit_path=junit_path, on_line=say,
                        on_output=say if verbose else None, environ=dict(os.environ), options=options,
                        listeners=listeners, started_scheduler=caught.watch, history=history,
                    )
            history.close()
            _keep_reports(out_dir, report, secret_masker(job, os.environ), keep)
    except InputError as exc:
        raise fail_input(exc)
    except (ValueError, OutputError) as exc:  # a jump-host loop in the inventory; an output path
        raise usage_error(str(exc))
    masker = secret_masker(job, os.environ)
    counts = ", ".join(f"{n} {name}" for name, n in report.summary()["counts"].items() if n)
    typer.echo(f"{job.name}: {counts} (run {report.run_id})")
    for suite in report.suites:
        # One line per distinct verdict: a failed preflight says the same for every check.
        groups: dict[tuple[str, str], list[str]] = {}
        for case in suite.cases:
            if case.outcome.value not in ("pass", "xfail", "skip"):
                category = f"/{case.verdict.category}" if case.verdict.category else ""
                groups.setdefault((f"{case.outcome}{category}", case.verdict.message), []).append(case.name)
        for (outcome, message), names in groups.items():
            typer.echo(masker.text(f"  {suite.host}: {', '.join(names)}: {outcome}: {message}"))
    typer.echo("")
    typer.echo(render_table(["host", *report.checks], matrix(report.suites, report.checks)))
    typer.echo("")
    typer.echo(f"JUnit: {junit_path or out_dir / 'junit.xml'}  summary: {out_dir / 'summary.json'}  logs: {report.logs}/")
    sys.stdout.flush()
    if report.history_error:  # the verdicts and the exit code stand; the history missed this run
        typer.echo(f"harness: {report.history_error}", err=True)
    else:
        typer.echo(f"history: {report.history}")
    if caught.signal is not None:
        typer.echo(f"{job.name}: cancelled by {signal.Signals(caught.signal).name}; the report holds what finished", err=True)
        raise typer.Exit(128 + caught.signal)  # 130 for Ctrl-C, 143 for SIGTERM
    raise typer.Exit(report.exit_code)


def _log(line: str) -> None:
    """A plain, timestamped stderr line (a scheduled run's journal greps like its progress)."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    typer.echo(f"{stamp} {line}", err=True)


@contextlib.contextmanager
def _run_lock(out_dir: Path, job: str, wait: float):
    """Hold the job's run lock in ``out_dir`` for the block, or exit: 4 when another run holds
    it, 2 when the lock file cannot be used, 130 on Ctrl-C while waiting."""
    from harness.orchestration.runlock import LockBusy, LockError, acquire

    try:
        lock = acquire(out_dir, job, wait=wait, on_line=_log)
    except LockBusy as exc:
        hint = "" if wait else "; --lock-wait SECONDS waits for it"
        _log(f"{job}: {exc}; nothing ran (exit {EXIT_LOCKED}){hint}")
        raise typer.Exit(EXIT_LOCKED)
    except LockError as exc:
        raise usage_error(f"{job}: {exc}")
    except KeyboardInterrupt:
        _log(f"{job}: interrupted while waiting for the run lock; nothing ran")
        raise typer.Exit(130)
    with lock:
        yield lock


def _keep_reports(out_dir: Path, report, masker, keep: int | None) -> None:
    """The run's own reports in its folder, ``latest`` -> it, and the retention limit. A
    problem here is said, never a crash: the run's verdict stands."""
    from harness.orchestration.retention import archive, prune

    try:
        notes = archive(out_dir, report, masker)
        if keep is not None:
            pruned = prune(out_dir, report.job, keep, current=report.run_id)
            if pruned.removed:
                _log(f"{report.job}: removed {len(pruned.removed)} old run folder(s) of {out_dir} (--keep {keep}): {', '.join(pruned.removed)}")
            notes.extend(f"not removed: {problem}" for problem in pruned.problems)
    except (OSError, OutputError) as exc:
        notes = [f"reports of run {report.run_id}: {exc}"]
    for note in notes:
        _log(f"{report.job}: retention: {note}")


def _lab_with_slurm(name: str) -> None:
    """Bring the simulated lab up with Slurm unless it already runs it (as `lab up --slurm`)."""
    from harness.cli.lab import open_lab
    from harness.lab.sim import DEFAULT_HOSTS, LabError, host_name

    sim = open_lab(name)
    try:
        if not sim.has_slurm() or not sim.status().up:
            faults = {} if sim.status().hosts else {host_name(name, DEFAULT_HOSTS): ["no-hugepages"]}
            sim.up(DEFAULT_HOSTS, faults, slurm=True)
    except LabError as exc:
        typer.echo(f"lab {name}: {exc}", err=True)
        raise typer.Exit(3)


class _Signals:
    """The first SIGINT or SIGTERM cancels the run; later ones change nothing (the cleanup runs)."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self.scheduler = None

    def watch(self, scheduler) -> None:
        self.scheduler = scheduler
        if self.signal is not None:
            scheduler.cancel()

    def handle(self, signum, frame) -> None:
        if self.signal is None:
            self.signal = signum
        if self.scheduler is not None:
            self.scheduler.cancel()


@contextlib.contextmanager
def _cancelled_by_signals():
    caught = _Signals()
    previous = {sig: signal.signal(sig, caught.handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield caught
    finally:
        if caught.signal is None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        # else: the run was cancelled and the command is on its way out (reports, history,
        # retention, exit 128+N); a second Ctrl-C must not kill it halfway, so signals stay caught
