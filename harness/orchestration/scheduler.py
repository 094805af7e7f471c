"""The scheduler: one job across its hosts, concurrently, inside a failure boundary.

A run is data flowing one way: the pure plan (:mod:`harness.core.plan`) says which check runs
where; hosts are preflighted at once; the image is built once and delivered to every host at
once; then each host runs as many checks at a time as it has cards for (a check holds a lease
on the cards it uses: :mod:`harness.core.lease`), and every finished check is an event
(:mod:`harness.core.events`) that listeners (the report writer, the console) consume.

On top of running checks it decides only what a lab needs decided:

- **retries and quarantine**: an environment fault of a pooled check (``fanout: any``) is retried
  once on another healthy host, and marks its host suspect; after ``quarantine_after`` faults a
  host runs nothing more in this run. Real failures are never retried.
- **hang triage**: a card check that hung (timeout or a device-hang signature) has its cards
  reset (the host's ``reset`` command, ``tt-smi -r``), the job's smoke check run, and is run once
  more: the smoke check failing is the board's fault (``env_fault/device-hang``, host
  quarantined); the check hanging again after a good smoke check is the check's (a real failure).
- **cancellation**: :meth:`Scheduler.cancel` starts nothing more, cuts the lifelines of running
  checks (their hosts remove the containers and give up the leases), and reports what did not
  finish as skipped.

Any exception of the harness while preflighting, delivering or running becomes an ``error``
(``harness/internal``) with its traceback in the report, never a crash and never a lost report.
"""

from __future__ import annotations

import dataclasses
import shlex
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from harness.core import junit
from harness.core.events import (
    CheckFinished,
    CheckStarted,
    CheckWaiting,
    Event,
    HostChecked,
    HostQuarantined,
    ImageReady,
    Listener,
    RunStarted,
    deliver,
)
from harness.core.hostfacts import PreflightReport
from harness.core.inventory import Host, Inventory
from harness.core.invocation import needs_card
from harness.core.matrix import cell
from harness.core.outcomes import (
    CaseResult,
    EnvCategory,
    Evidence,
    HarnessErrorKind,
    Outcome,
    SuiteResult,
    Verdict,
    apply_expectation,
)
from harness.core.plan import Task, allocate, fits, plan
from harness.core.spec import CheckSpec, JobSpec, check_profile
from harness.execution import images
from harness.execution.connect import Connections
from harness.execution.preflight import preflight
from harness.execution.runner import DEFAULT_LEASE_WAIT, HostContext, Runner
from harness.execution.transport import Transport, TransportError

LineSink = Callable[[str], None]
HUNG = frozenset({EnvCategory.TIMEOUT, EnvCategory.DEVICE_HANG})
RESET_TIMEOUT = 300.0
MAX_PREFLIGHTS = 16  # hosts asked at once; each mostly waits on its host


@dataclass(frozen=True)
class Options:
    lease_wait: float = DEFAULT_LEASE_WAIT  # seconds a check waits for a card another run holds
    quarantine_after: int = 2  # environment faults after which a host runs nothing more
    root: str = "/"  # hosts' /sys, /dev, /proc under this folder (a stand-in tree; tests)


@dataclass
class _HostState:
    """One host during the run. Mutated only under the scheduler's lock."""

    host: Host
    transport: Transport | None = None
    report: PreflightReport | None = None
    runner: Runner | None = None
    unusable: Verdict | None = None  # why nothing runs here (image not delivered, a crash)
    properties: dict[str, str] = field(default_factory=dict)
    held: dict[int, int] = field(default_factory=dict)  # card -> checks of this run holding it
    env_faults: list[str] = field(default_factory=list)
    quarantined: str | None = None
    cases: dict[str, list[CaseResult]] = field(default_factory=dict)  # by check
    notes: list[str] = field(default_factory=list)
    sick: str | None = None  # triage found the board itself broken: quarantine now
    started: float = field(default_factory=time.monotonic)
    stamp: str = ""


class Scheduler:
    def __init__(
        self,
        job: JobSpec,
        inventory: Inventory,
        hosts: Sequence[Host],
        run_id: str,
        log_dir: Path,
        *,
        listeners: Iterable[Listener] = (),
        on_line: LineSink | None = None,
        on_output: LineSink | None = None,
        environ: Mapping[str, str] | None = None,
        options: Options = Options(),
        now: Callable[[], str],
    ):
        self.job = job
        self.inventory = inventory
        self.run_id = run_id
        self.log_dir = log_dir
        self.listeners = list(listeners)
        self.say = on_line or (lambda line: None)
        self.on_output = on_output
        self.environ = dict(environ or {})
        self.options = options
        self.now = now
        self.hosts = {host.name: _HostState(host, stamp=now()) for host in hosts}
        self.pending: list[Task] = []
        self.running = 0
        self._cv = threading.Condition()
        self._cancelled = threading.Event()
        self._built: images.BuiltImage | images.ImageError | None = None
        self._current = threading.local()  # the check each worker thread runs, for its events

    # -- control --------------------------------------------------------------------------
    def cancel(self) -> None:
        """Start nothing more; running checks are stopped by their hosts (idempotent)."""
        self._cancelled.set()
        with self._cv:
            runners = [state.runner for state in self.hosts.values() if state.runner is not None]
            self._cv.notify_all()
        for runner in runners:
            runner.cancel()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def emit(self, event: Event) -> None:
        deliver(self.listeners, event, self.say)

    # -- the run --------------------------------------------------------------------------
    def run(self) -> list[SuiteResult]:
        self.emit(RunStarted(self.run_id, self.job.name, tuple(c.name for c in self.job.checks), tuple(self.hosts)))
        with Connections(self.inventory) as connections:
            try:
                self._preflight_all(connections)
                self.pending = list(self._runnable(plan(self.job, tuple(self.hosts))))
                if self.pending and not self.cancelled:
                    self._prepare_hosts()
                    self._dispatch()
            except Exception:  # the boundary of last resort: everything not finished is an error
                self._fail_pending(internal_error("the scheduler failed", traceback.format_exc()))
            self._finish_pending()
            self._sweep()
        return self.suites()

    def _preflight_all(self, connections: Connections) -> None:
        def one(state: _HostState) -> None:
            try:
                state.transport = connections.transport(state.host)
                state.report = preflight(
                    state.transport, state.host, root=self.options.root, probe_paths=_mount_sources(self.job)
                )
                state.properties = _properties(self.job, state.host, state.report)
            except Exception:
                state.unusable = internal_error(f"preflight of {state.host.name} failed", traceback.format_exc())
            faults = tuple(f"{c.name} [{c.category}]" for c in state.report.faults) if state.report else ("crashed",)
            self.emit(HostChecked(state.host.name, faults))

        with ThreadPoolExecutor(max_workers=min(MAX_PREFLIGHTS, len(self.hosts)) or 1) as pool:
            list(pool.map(one, self.hosts.values()))

    def _runnable(self, tasks: Iterable[Task]) -> Iterable[Task]:
        """Tasks that may run somewhere; the others are reported at once with why not."""
        for task in tasks:
            check = self.job.check(task.check)
            if task.host is not None:
                state = self.hosts[task.host]
                why = self._blocked(state, task)
                if why is not None:
                    self._record(state, task, [not_run(self.job, check, why)])
                    continue
            elif all(self._blocked(state, task) is not None for state in self.hosts.values()):
                state = next(iter(self.hosts.values()))
                self._record(state, task, [not_run(self.job, check, self._blocked(state, task))])
                continue
            yield task

    def _blocked(self, state: _HostState, task: Task) -> Verdict | None:
        """Why ``task`` cannot run on this host at all, or None."""
        if state.unusable is not None:
            return state.unusable
        if state.quarantined is not None:
            return Verdict.env_fault(
                _last_category(state), f"not run: host {state.host.name} is quarantined ({state.quarantined})"
            )
        check = self.job.check(task.check)
        if check_profile(self.job, check).privileged and not state.host.allow_privileged:
            return Verdict.error(
                HarnessErrorKind.SPEC,
                f"{check.name} asks for a privileged container, which {state.host.name} does not allow "
                "(allow_privileged: true in its inventory entry)",
            )
        card = needs_card(self.job, check)
        if state.report is not None and state.report.blocking(card):
            return state.report.verdict(card)
        if not fits(task, state.host.device_ids):
            return Verdict.error(
                HarnessErrorKind.SPEC,
                f"{task.check} needs {task.devices} card(s); {state.host.name} has {len(state.host.device_ids)}",
            )
        return None

    def _prepare_hosts(self) -> None:
        """Build the image once, then deliver it to every host that has work, all at once."""
        try:
            rendering = images.render(self.job)  # once: it hashes a local checkout's every file
            self.say(f"== {self.job.name}: image {rendering.tag}")
            self._built = images.ensure_rendered(rendering, on_progress=self.say)
        except images.ImageError as exc:
            self._built = exc
        except Exception:
            self._built = None
            verdict = internal_error("the image build failed", traceback.format_exc())
            for state in self.hosts.values():
                state.unusable = verdict
        targets = [s for s in self.hosts.values() if s.unusable is None and any(t.may_run_on(s.host.name) for t in self.pending)]
        with ThreadPoolExecutor(max_workers=min(MAX_PREFLIGHTS, len(targets)) or 1) as pool:
            list(pool.map(self._deliver, targets))
        with self._cv:
            self.pending = list(self._runnable(self.pending))

    def _deliver(self, state: _HostState) -> None:
        built = self._built
        try:
            if isinstance(built, images.ImageError):
                state.unusable = image_verdict(built)
                return
            assert built is not None and state.transport is not None and state.report is not None
            state.properties.update({"image": built.tag, "image.digest": built.digest})
            host = state.host
            if not (host.transport == "local" and host.docker is None):
                delivered = images.distribute(
                    built, state.transport, host.registry, on_progress=self.say, docker_argv=images.host_docker_command(host)
                )
                state.properties["image.delivery"] = str(delivered.delivery)
                state.properties["image.digest"] = delivered.digest
            self.emit(ImageReady(host.name, built.tag, state.properties["image.digest"]))
            facts = state.report.facts
            context = HostContext(
                name=host.name,
                device_ids=host.device_ids,
                iommu=bool(facts.iommu) if facts else False,
                has_path=facts.has_path if facts else None,
                docker=images.host_docker_command(host),
            )
            state.runner = Runner(
                self.job, state.transport, context, built.tag, self.run_id, self.log_dir / host.name,
                on_line=self.on_output, secrets=self.environ, lease_wait=self.options.lease_wait,
                on_wait=lambda line, host=host.name: self._waiting(host, line),
            )
            if self.cancelled:
                state.runner.cancel()
        except images.ImageError as exc:
            state.unusable = image_verdict(exc)
        except TransportError as exc:
            state.unusable = exc.verdict()
        except Exception:
            state.unusable = internal_error(f"delivering the image to {state.host.name} failed", traceback.format_exc())

    def _waiting(self, host: str, line: str) -> None:
        self.emit(CheckWaiting(host, getattr(self._current, "check", "?"), line))

    # -- dispatch -------------------------------------------------------------------------
    def _dispatch(self) -> None:
        workers = []
        for state in self.hosts.values():
            if state.runner is None:
                continue
            cardless = any(t.devices == 0 and t.may_run_on(state.host.name) for t in self.pending)
            slots = max(1, len(state.host.device_ids)) + (1 if cardless else 0)
            for slot in range(slots):
                thread = threading.Thread(target=self._worker, args=(state,), name=f"{state.host.name}-{slot}", daemon=True)
                thread.start()
                workers.append(thread)
        for thread in workers:
            while thread.is_alive():
                thread.join(timeout=0.5)  # short waits keep the main thread responsive to signals

    def _worker(self, state: _HostState) -> None:
        while True:
            with self._cv:
                picked = None
                while picked is None:
                    if self.cancelled or state.quarantined is not None or state.unusable is not None:
                        return
                    picked = self._pick(state)
                    if picked is None:
                        # Nothing for this host now. While checks run, one may hand work back
                        # (a retry, freed cards); once nothing runs, nothing will.
                        if self.running == 0:
                            return
                        self._cv.wait(timeout=1.0)
                task, devices = picked
                self.running += 1
                for device in devices:
                    state.held[device] = state.held.get(device, 0) + 1
            try:
                cases, note = self._execute(state, task, devices)
            except Exception:
                crashed = internal_error("running the check failed", traceback.format_exc())
                cases, note = [not_run(self.job, self.job.check(task.check), crashed)], ""
            with self._cv:
                self.running -= 1
                for device in devices:
                    state.held[device] -= 1
                self._settle(state, task, cases, note)
                self._cv.notify_all()

    def _could_run(self, state: _HostState, task: Task) -> bool:
        return task.may_run_on(state.host.name) and self._blocked(state, task) is None

    def _pick(self, state: _HostState) -> tuple[Task, tuple[int, ...]] | None:
        for task in self.pending:
            if not self._could_run(state, task):
                continue
            devices = allocate(task, state.host.device_ids, state.held)
            if devices is not None:
                self.pending.remove(task)
                return task, devices
        return None

    def _execute(self, state: _HostState, task: Task, devices: tuple[int, ...]) -> tuple[list[CaseResult], str]:
        """Run a task: its cases, and a note of what was done on top (a retry, a triage)."""
        check = self.job.check(task.check)
        runner = state.runner
        assert runner is not None
        self.emit(CheckStarted(state.host.name, check.name, devices))
        self._current.check = check.name
        cases = runner.run_check(check, devices)
        note = f"retry after an environment fault on {task.retry_of}" if task.retry_of else ""
        if devices and _hung(cases) and not self.cancelled:
            cases, triage = self._triage(state, check, devices, cases)
            note = "; ".join(filter(None, (note, triage)))
        return cases, note

    def _triage(self, state: _HostState, check: CheckSpec, devices: tuple[int, ...], first: list[CaseResult]):
        """Tell a sick board from a check that hangs it: reset, smoke check, run again."""
        runner, transport, host = state.runner, state.transport, state.host
        assert runner is not None and transport is not None
        steps = [Evidence(None, f"triage 1: {check.name} hung: {_first_message(first)}", "triage")]
        reset = [arg.replace("{devices}", ",".join(map(str, devices))) for arg in host.reset]
        try:
            done = transport.run(reset, timeout=RESET_TIMEOUT)
            steps.append(Evidence(None, f"triage 2: `{shlex.join(reset)}` exit {done.exit_status}: {done.stdout_tail.strip()[-200:]}", "triage"))
        except TransportError as exc:
            steps.append(Evidence(None, f"triage 2: `{shlex.join(reset)}` could not run: {exc.message}", "triage"))
        smoke = self.job.check(self.job.smoke) if self.job.smoke and self.job.smoke != check.name else None
        if smoke is not None:
            smoke_cases = runner.run_check(smoke, devices)
            verdict = cell(smoke_cases)
            steps.append(Evidence(None, f"triage 3: smoke check {smoke.name} after the reset: {verdict}", "triage"))
            if any(c.outcome not in (Outcome.PASS, Outcome.FLAKY) for c in smoke_cases):
                state.sick = f"{check.name} hung and the smoke check {smoke.name} fails after a reset"
                sick = Verdict.env_fault(
                    EnvCategory.DEVICE_HANG,
                    f"the board of {host.name} is sick: {check.name} hung, and after a reset the smoke check "
                    f"{smoke.name} does not pass ({verdict})",
                    steps,
                )
                return [dataclasses.replace(c, verdict=sick) for c in first], "triage: the board, not the check"
        again = runner.run_check(check, devices)
        if _hung(again):
            why = "the smoke check passed after the reset" if smoke else "after a reset"
            steps.append(Evidence(None, f"triage 4: {check.name} hung again, {why}", "triage"))
            hangs = Verdict(
                Outcome.FAIL,
                message=f"{check.name} hangs the device: it hung twice, and {why} (the board is fine)",
                evidence=tuple(steps),
            )
            return [
                dataclasses.replace(c, verdict=apply_expectation(hangs, check.known_bug), attempts=c.attempts)
                for c in again
            ], "triage: the check hangs the device"
        steps.append(Evidence(None, f"triage 4: run again after the reset: {cell(again)}", "triage"))
        # The check ran once the board was reset: the hang was the board's. Reported as such
        # (never hidden behind the rerun's pass); the rerun's own result is in the evidence.
        cured = Verdict.env_fault(
            EnvCategory.DEVICE_HANG,
            f"the board of {host.name} hung during {check.name}; after a reset the check ran ({cell(again)})",
            steps,
        )
        return [dataclasses.replace(c, verdict=cured) for c in again], "triage: the board hung once, a reset cured it"

    def _settle(self, state: _HostState, task: Task, cases: list[CaseResult], note: str) -> None:
        """Record a finished task, or retry it elsewhere; count environment faults; quarantine."""
        if self.cancelled and any(c.outcome not in (Outcome.PASS, Outcome.XFAIL, Outcome.FLAKY) for c in cases):
            # A check stopped by the cancel says nothing about the code or the card.
            cancelled = Verdict(Outcome.SKIP, message="cancelled while it ran")
            cases = [dataclasses.replace(c, verdict=cancelled) for c in cases] or [not_run(self.job, self.job.check(task.check), cancelled)]
        faults = sorted({str(c.verdict.category) for c in cases if c.outcome is Outcome.ENV_FAULT and c.verdict.category})
        if faults and not self.cancelled:
            state.env_faults.append(faults[0])
            retry = dataclasses.replace(task, excluded=task.excluded | {state.host.name}, retry_of=state.host.name)
            if task.host is None and task.retry_of is None and any(self._could_run(s, retry) for s in self.hosts.values() if s is not state):
                self.pending.insert(0, retry)
                state.notes.append(f"{task.check}: env_fault/{faults[0]}, retried on another host")
                self.emit(CheckFinished(
                    state.host.name, task.check, (), f"env_fault/{faults[0]}: retried on another host", retried=tuple(cases)
                ))
                self._maybe_quarantine(state)
                return
        self._record(state, task, cases, note)
        if faults:
            self._maybe_quarantine(state)

    def _maybe_quarantine(self, state: _HostState) -> None:
        if state.quarantined is None and (state.sick or len(state.env_faults) >= self.options.quarantine_after):
            state.quarantined = state.sick or (
                f"{len(state.env_faults)} environment faults in this run: {', '.join(dict.fromkeys(state.env_faults))}"
            )
            self.emit(HostQuarantined(state.host.name, state.quarantined))
            # Its pinned work cannot move: report it now; pooled work goes to the other hosts.
            for task in [t for t in self.pending if t.host == state.host.name]:
                self.pending.remove(task)
                self._record(state, task, [not_run(self.job, self.job.check(task.check), self._blocked(state, task))])
            self._cv.notify_all()

    def _record(self, state: _HostState, task: Task, cases: list[CaseResult], note: str = "") -> None:
        state.cases.setdefault(task.check, []).extend(cases)
        if note:
            state.notes.append(f"{task.check}: {note}")
        self.emit(CheckFinished(state.host.name, task.check, tuple(cases), note))

    def _fail_pending(self, verdict: Verdict) -> None:
        with self._cv:
            for task in self.pending:
                self._record(self._home(task), task, [not_run(self.job, self.job.check(task.check), verdict)])
            self.pending = []

    def _finish_pending(self) -> None:
        """What never ran: cancelled, or no host left that could take it."""
        if self.cancelled:
            self._fail_pending(Verdict(Outcome.SKIP, message="not run: the run was cancelled"))
            return
        with self._cv:
            for task in list(self.pending):
                state = self._home(task)
                why = self._blocked(state, task) or Verdict.env_fault(
                    EnvCategory.NETWORK, f"not run: no host of the pool could take {task.check}"
                )
                self._record(state, task, [not_run(self.job, self.job.check(task.check), why)])
            self.pending = []

    def _home(self, task: Task) -> _HostState:
        if task.host is not None:
            return self.hosts[task.host]
        return self.hosts[task.retry_of] if task.retry_of else next(iter(self.hosts.values()))

    def _sweep(self) -> None:
        """Remove whatever container of this run is still on a host (a cancel, a lost connection)."""
        for state in self.hosts.values():
            if state.runner is not None:
                try:
                    state.runner.remove_leftovers()
                except Exception:  # the host is gone; `harness cleanup` finds them by label later
                    pass

    # -- the report -----------------------------------------------------------------------
    def suites(self) -> list[SuiteResult]:
        """The run so far, one suite per host, cases in check order (safe to call any time)."""
        with self._cv:
            suites = []
            for state in self.hosts.values():
                cases = [case for check in self.job.checks for case in state.cases.get(check.name, ())]
                properties = dict(state.properties or {"host": state.host.name})
                if state.quarantined:
                    properties["quarantined"] = state.quarantined
                for i, note in enumerate(state.notes):
                    properties[f"note.{i + 1}"] = note
                suites.append(
                    SuiteResult(self.job.name, state.host.name, tuple(cases), properties, state.stamp, time.monotonic() - state.started)
                )
            return suites


def _hung(cases: Sequence[CaseResult]) -> bool:
    return any(c.outcome is Outcome.ENV_FAULT and c.verdict.category in HUNG for c in cases)


def _first_message(cases: Sequence[CaseResult]) -> str:
    return next((c.verdict.message for c in cases if c.verdict.message), "no message")


def _last_category(state: _HostState) -> EnvCategory:
    return EnvCategory(state.env_faults[-1]) if state.env_faults else EnvCategory.DEVICE_HANG


def internal_error(what: str, trace: str) -> Verdict:
    """An exception of the harness itself, as a verdict: the traceback goes into the report."""
    last = trace.strip().splitlines()[-1] if trace.strip() else "no detail"
    return Verdict.error(
        HarnessErrorKind.INTERNAL,
        f"{what}: {last} (a bug in tt-harness: please report it with this traceback)",
        [Evidence(None, line) for line in trace.strip().splitlines()[-12:]],
    )


def not_run(job: JobSpec, check: CheckSpec, verdict: Verdict) -> CaseResult:
    """A synthetic case for a check that did not run: never an empty report, never a silent skip."""
    return junit.synthetic_case(check.name, verdict, job=job.name)


def image_verdict(exc: images.ImageError) -> Verdict:
    evidence = [Evidence(None, line) for line in exc.log_tail[-5:]]
    return Verdict.env_fault(exc.category if isinstance(exc.category, EnvCategory) else EnvCategory.IMAGE, exc.message, evidence)


def _properties(job: JobSpec, host: Host, report: PreflightReport) -> dict[str, str]:
    props = {
        "host": host.name,
        "board": ",".join(host.board_types()) or "none",
        "arch": job.device.arch if job.device else "none",
        "device_profile": job.profile.name,
        "device_profile.docker_run_options": " ".join(job.profile.docker_run_options(job.image.home)),
        "image.template": job.image.template,
    }
    if job.image.git:
        props[f"{job.image.project}.ref"] = f"{job.image.git}@{job.image.ref}"
    elif job.image.wheel:
        props["ttnn.wheel"] = job.image.wheel
    facts = report.facts
    if facts is not None:
        if facts.kmd_version.value:
            props["kmd.version"] = facts.kmd_version.value
        for device in facts.devices:
            if device.fw_bundle.value:
                props[f"firmware.device{device.id}"] = device.fw_bundle.value
    props["preflight"] = "ok" if report.ok else "fault: " + "; ".join(f"{c.name}: {c.reason}" for c in report.faults)
    return props


def _mount_sources(job: JobSpec) -> tuple[str, ...]:
    profiles = [job.profile, *(check.profile for check in job.checks if check.profile is not None)]
    return tuple(dict.fromkeys(mount.source for profile in profiles for mount in profile.mounts))
