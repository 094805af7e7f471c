"""Running a job's checks on one host, in correctly mounted containers.

For each attempt of each check the runner makes a fresh work folder on the host (inputs in,
artifacts out), runs the exact ``docker run`` argv that ``harness render`` prints, streams the
container's output into local logs, copies the artifacts back and judges the attempt:

1. the container's ending (:mod:`harness.core.container_exit`): Docker failures, the probe's
   missing mounts and timeouts are environment faults before any test output is read;
2. otherwise the test's own report: gtest/pytest XML per test case, the op order of the
   compiler's output, or the log through the signature classifier.

Attempts are combined per test case (``repeat: N``) and the known-bug expectation applied.
Containers carry ``harness.run``/``harness.job``/``harness.check`` labels, so whatever a lost
connection leaves behind is found and removed when the host answers again.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

from harness.core import invocation, lease
from harness.core.invocation import needs_card
from harness.core.lease import leased_argv
from harness.core.container_exit import judge_exit
from harness.core.judge import after_timeout, judge_log, without_report
from harness.core.ingest import IngestError, read_junit
from harness.core.invocation import docker_run_argv
from harness.core.outcomes import (
    Attempt,
    CaseResult,
    EnvCategory,
    HarnessErrorKind,
    Outcome,
    Verdict,
    combine_cases,
)
from harness.core.secretref import Masker, secret_name
from harness.core.spec import CheckSpec, JobSpec, secret_masker
from harness.mlir.check import ab_note, judge_pipeline_output
from harness.execution.transport.base import ArtifactError, CommandResult, Lifeline, Transport, TransportError

MAX_ARTIFACT_BYTES = 256 * 1024 * 1024  # gtest XML and compiler output; a bigger one is a bug
PROBE_HEAD_LINES = 64  # the probe prints one line per item; it always comes first
STDERR_TAIL_LINES = 50
STOP_GRACE_SECONDS = 10
DEFAULT_LEASE_WAIT = lease.DEFAULT_WAIT
LineSink = Callable[[str], None]


@dataclass(frozen=True)
class HostContext:
    """What the runner needs to know about the host it runs on (from the inventory and preflight)."""

    name: str
    device_ids: tuple[int, ...] = ()
    iommu: bool = False
    has_path: Callable[[str], bool] | None = None
    docker: tuple[str, ...] = ("docker",)  # how docker runs there (its engine endpoint)


@dataclass
class _Attempts:
    """Attempts collected per test case, in first-seen order."""

    by_case: dict[tuple[str, str], list[Attempt]] = field(default_factory=lambda: collections.OrderedDict())

    def add(self, classname: str, name: str, attempt: Attempt) -> None:
        self.by_case.setdefault((classname, name), []).append(attempt)


class Runner:
    def __init__(
        self,
        job: JobSpec,
        transport: Transport,
        host: HostContext,
        image_ref: str,
        run_id: str,
        log_dir: Path,
        on_line: LineSink | None = None,
        secrets: dict[str, str] | None = None,
        lease_wait: float = DEFAULT_LEASE_WAIT,
        on_wait: LineSink | None = None,
    ):
        self.job = job
        self.transport = transport
        self.host = host
        self.image_ref = image_ref
        self.run_id = run_id
        self.log_dir = log_dir
        self.on_line = on_line
        self.secrets = secrets if secrets is not None else dict(os.environ)
        self.lease_wait = lease_wait
        self.on_wait = on_wait
        self.masker = secret_masker(job, self.secrets)
        self._orphans = False  # a lost connection may have left a container running there
        self._lock = threading.Lock()
        self._serial = 0  # numbers every container of this runner: names stay unique across retries
        self._lifelines: set[Lifeline] = set()
        self._cancelled = False

    def cancel(self) -> None:
        """Stop: no new container starts, and each running one is removed by its host (its
        lifeline is cut), which ends its check."""
        with self._lock:
            self._cancelled = True
            for lifeline in self._lifelines:
                lifeline.cut()

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    # -- public --------------------------------------------------------------------------
    def run_check(self, check: CheckSpec, devices: Sequence[int] | None = None) -> list[CaseResult]:
        """Every attempt of ``check``, on ``devices`` (default: all the host's cards), combined
        per test case. A cancelled runner starts no further attempt."""
        devices = tuple(self.host.device_ids if devices is None else devices)
        attempts = _Attempts()
        for number in range(1, check.repeat + 1):
            if self._cancelled:
                break
            for classname, name, attempt in self._attempt(check, number, devices):
                attempts.add(classname, name, attempt)
        return combine_cases(check.name, check.known_bug, attempts.by_case)

    def remove_leftovers(self) -> None:
        """Remove containers of this run that a lost connection or a timeout left behind."""
        found = self.transport.run(
            [*self.host.docker, "ps", "-aq", "--filter", f"label=harness.run={self.run_id}"], timeout=60
        )
        ids = found.stdout_tail.split()
        if ids:
            self.transport.run([*self.host.docker, "rm", "-f", *ids], timeout=120)

    # -- one attempt ---------------------------------------------------------------------
    def _attempt(self, check: CheckSpec, number: int, devices: tuple[int, ...]) -> Iterator[tuple[str, str, Attempt]]:
        classname = f"{self.job.name}.{check.name}"
        local = self.log_dir / check.name / f"attempt-{number}"
        local.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        try:
            if self._orphans:
                self.remove_leftovers()  # the host answers again: clear what the lost run left
                self._orphans = False
            wanted = [*_secret_names(check).values(), *_secret_file_vars(check).values()]
            missing = [name for name in wanted if name not in self.secrets]
            if missing:
                raise _SpecProblem(f"env references ${{{missing[0]}}}, which is not set where harness runs")
            broken = [name for name in _secret_names(check).values() if any(c in self.secrets[name] for c in "\r\n\0")]
            if broken:
                # One variable per line in the --env-file: a newline would smuggle in another.
                raise _SpecProblem(f"${{{broken[0]}}} holds a line break or NUL, which an env file cannot carry: refused")
            with self._workdir(check) as workdir:
                name = self._next_name(check, number)
                result = self._run_container(
                    self._docker_run(check, number, workdir, devices, name),
                    timeout=check.timeout,
                    on_stdout=self._masked(self.on_line),
                    on_stderr=self._stderr_sink(),
                    stdout_log=local / "stdout.log",
                    stderr_log=local / "stderr.log",
                    tail_lines=STDERR_TAIL_LINES,
                )
                self._seal_logs(local)
                if result.timed_out:
                    self._stop(name)
                duration = time.monotonic() - started
                output = _output_excerpt(local)
                verdict = judge_exit(
                    result.exit_status, result.timed_out, _numbered_head_and_tail(local / "stderr.log"), check.timeout
                )
                if result.timed_out and verdict is not None:
                    verdict = after_timeout(verdict, _lines(local / "stdout.log", local / "stderr.log"))
                if verdict is not None:
                    yield classname, check.name, Attempt(verdict, duration, output)
                    return
                yield from self._judge_test(check, workdir, local, result, duration, output, devices)
        except TransportError as exc:
            verdict = exc.verdict()
            if exc.category is EnvCategory.SSH:
                self._orphans = True
                verdict = Verdict.env_fault(
                    exc.category,
                    f"{exc.message}; {self.host.name} removes the check's container when it sees the harness gone, "
                    "and what is left is removed when it answers again",
                )
            yield classname, check.name, Attempt(verdict, time.monotonic() - started)
        except _SpecProblem as exc:
            yield classname, check.name, Attempt(Verdict.error(HarnessErrorKind.SPEC, str(exc)), 0.0)

    def _judge_test(self, check, workdir, local, result, duration, output, devices):
        classname = f"{self.job.name}.{check.name}"
        if check.kind in ("gtest", "pytest"):
            report = invocation.GTEST_XML if check.kind == "gtest" else invocation.PYTEST_XML
            xml = local / report
            try:
                self.transport.get(f"{workdir}/out/{report}", xml, MAX_ARTIFACT_BYTES)
                cases = read_junit(xml)
            except (ArtifactError, IngestError):
                cases = None  # no report: the binary crashed or never started its tests
            if cases:
                for case in cases:
                    yield f"{classname}.{case.classname}" if case.classname else classname, case.name, Attempt(
                        case.verdict, case.duration, case.output
                    )
                return
            verdict = without_report(check.kind, report, _lines(local / "stdout.log", local / "stderr.log"), result.exit_status)
            yield classname, check.name, Attempt(verdict, duration, output)
            return
        if check.kind == "mlir-order":
            yield classname, check.name, Attempt(self._judge_mlir(check, workdir, local, result, devices), duration, output)
            return
        yield classname, check.name, Attempt(self._judge_log(local, result.exit_status), duration, output)

    def _judge_mlir(self, check, workdir, local, result, devices) -> Verdict:
        if result.exit_status != 0:
            return self._judge_log(local, result.exit_status)  # a compiler crash is a real failure
        output = local / invocation.MLIR_OUTPUT
        try:
            self.transport.get(f"{workdir}/out/{invocation.MLIR_OUTPUT}", output, MAX_ARTIFACT_BYTES)
        except ArtifactError as exc:
            return Verdict.error(HarnessErrorKind.ARTIFACT, f"the pipeline wrote no output: {exc}")
        # --mlir-print-ir-after-all prints to stderr: the local stderr log is the pass dump.
        verdict = judge_pipeline_output(output, local / "stderr.log", fused=check.fused)
        if verdict.outcome is Outcome.FAIL and check.ab:
            verdict = self._confirm_with_eio_off(check, local, verdict, devices)
        return verdict

    def _confirm_with_eio_off(self, check: CheckSpec, attempt_dir: Path, verdict: Verdict, devices) -> Verdict:
        """A/B: rerun with EraseInverseOps disabled; order restored there confirms EIO as the cause.
        The rerun only adds a note: whatever happens to it, the verdict stays the first run's."""
        control = dataclasses.replace(check, name=f"{check.name}-eio-off", command=eio_disabled(check.command), ab=False)
        local = attempt_dir / "eio-off"
        local.mkdir(parents=True, exist_ok=True)
        number = int(attempt_dir.name.rpartition("-")[2])
        with self._workdir(control) as workdir:
            name = self._next_name(control, number)
            result = self._run_container(
                self._docker_run(control, number, workdir, devices, name), timeout=check.timeout,
                stdout_log=local / "stdout.log", stderr_log=local / "stderr.log",
            )
            if result.timed_out:
                self._stop(name)
            output = local / invocation.MLIR_OUTPUT
            note = ab_note(result.exit_status if not result.timed_out else None)
            if note is None:
                try:
                    self.transport.get(f"{workdir}/out/{invocation.MLIR_OUTPUT}", output, MAX_ARTIFACT_BYTES)
                except ArtifactError as exc:
                    note = f"A/B rerun with enable-erase-inverse-ops-pass=false wrote no output ({exc})"
                else:
                    note = ab_note(0, judge_pipeline_output(output, None, fused=check.fused))
        return Verdict(verdict.outcome, message=f"{verdict.message}; {note}", evidence=verdict.evidence)

    # -- helpers -------------------------------------------------------------------------
    def _judge_log(self, local: Path, exit_status: int | None) -> Verdict:
        return judge_log(_lines(local / "stdout.log", local / "stderr.log"), exit_status)

    def _docker_run(self, check: CheckSpec, number: int, workdir: str, devices: tuple[int, ...], name: str) -> list[str]:
        """The check's ``docker run`` as the host runs it: named ``name``, holding a lease on
        ``devices`` (harness.core.lease), watched by the lifeline."""
        argv = docker_run_argv(
            self.job, check, self.image_ref, run_id=self.run_id, attempt=number, host_workdir=workdir,
            device_ids=devices, iommu=self.host.iommu, has_path=self.host.has_path,
            leased=devices if needs_card(self.job, check) else None, name=name,
        )
        held = devices if needs_card(self.job, check) else ()
        return leased_argv([*self.host.docker, *argv[1:]], name=name, devices=held, wait=self.lease_wait, docker=self.host.docker)

    def _next_name(self, check: CheckSpec, number: int) -> str:
        with self._lock:
            self._serial += 1
            return f"{invocation.container_name(self.run_id, check.name, number)}-{self._serial}"

    def _run_container(self, argv: list[str], **kwargs) -> CommandResult:
        """Run a container with a lifeline that :meth:`cancel` can cut."""
        lifeline = Lifeline()
        with self._lock:
            if self._cancelled:
                lifeline.cut()
            self._lifelines.add(lifeline)
        try:
            return self.transport.run(argv, stdin=lifeline, **kwargs)
        finally:
            with self._lock:
                self._lifelines.discard(lifeline)

    def _stderr_sink(self) -> LineSink | None:
        """Stderr lines to the output callback; a lease wait also to ``on_wait``."""
        out = self._masked(self.on_line)

        def sink(line: str) -> None:
            if self.on_wait is not None and line.startswith(lease.WAITING):
                self.on_wait(line)
            if out is not None:
                out(line)
        return sink if (out or self.on_wait) else None

    def _masked(self, sink: LineSink | None) -> LineSink | None:
        if sink is None or not self.masker.values:
            return sink
        return lambda line: sink(self.masker.text(line))

    def _seal_logs(self, local: Path) -> None:
        """The attempt's logs: readable by their owner only, secret values masked."""
        for log in (local / "stdout.log", local / "stderr.log"):
            if log.exists():
                os.chmod(log, 0o600)
                if self.masker.values:
                    mask_file(log, self.masker)

    @contextlib.contextmanager
    def _workdir(self, check: CheckSpec) -> Iterator[str]:
        # One round trip: the folder, and in it a world-writable out/ (the image's user may not be root).
        made = self.transport.run(
            ["sh", "-c", 'd=$(mktemp -d "$1") && mkdir -m 0777 -p "$d/out" "$d/in" && echo "$d"', "workdir",
             f"/tmp/harness-{self.run_id}-{check.name}-XXXXXX"],
            timeout=60,
        )
        if not made.ok:
            raise TransportError(EnvCategory.DISK, f"cannot make a work folder on {self.host.name}: {made.stderr_tail}")
        workdir = made.stdout_tail.strip()
        try:
            if check.input is not None:
                self.transport.put(check.input, f"{workdir}/in/{check.input.name}")
            self._put_secrets(check, workdir)
            yield workdir
        finally:
            with contextlib.suppress(TransportError):
                self.transport.run(["rm", "-rf", "--", workdir], timeout=120)

    def _put_secrets(self, check: CheckSpec, workdir: str) -> None:
        self._put_secret_files(check, workdir)
        refs = _secret_names(check)
        if not refs:
            return
        fd, path = tempfile.mkstemp(prefix="harness-secrets-")
        try:
            with os.fdopen(fd, "w") as handle:
                for key, var in refs.items():
                    handle.write(f"{key}={self.secrets[var]}\n")
            os.chmod(path, 0o600)
            self.transport.put(path, f"{workdir}/{invocation.SECRETS_ENV_FILE}")
        finally:
            os.unlink(path)

    def _put_secret_files(self, check: CheckSpec, workdir: str) -> None:
        """Each secret file, 0400 in a 0700 folder of the work folder (removed with it), bound
        read-only at /run/secrets in the container."""
        files = _secret_file_vars(check)
        if not files:
            return
        folder = f"{workdir}/{invocation.SECRET_FILES_DIR}"
        self.transport.run(["mkdir", "-m", "0700", "--", folder], timeout=60)
        for name, var in files.items():
            fd, path = tempfile.mkstemp(prefix="harness-secret-")
            try:
                with os.fdopen(fd, "w") as handle:
                    handle.write(self.secrets[var])
                os.chmod(path, 0o400)
                self.transport.put(path, f"{folder}/{name}")
            finally:
                os.unlink(path)

    def _stop(self, name: str) -> None:
        """After a timeout the docker client is gone but the container may still run: stop it."""
        self.transport.run([*self.host.docker, "stop", "-t", str(STOP_GRACE_SECONDS), name], timeout=STOP_GRACE_SECONDS + 60)
        self.transport.run([*self.host.docker, "rm", "-f", name], timeout=60)


class _SpecProblem(Exception):
    pass


def _secret_file_vars(check: CheckSpec) -> dict[str, str]:
    """Secret file name -> the variable its ``${VAR}`` reference names."""
    return {key: name for key, value in check.secret_files.items() if (name := secret_name(value))}


def _secret_names(check: CheckSpec) -> dict[str, str]:
    """Env key -> the variable its ``${VAR}`` reference names, for the check's secret env."""
    return {key: name for key, value in check.env.items() if (name := secret_name(value))}


def eio_disabled(command: Sequence[str]) -> tuple[str, ...]:
    """The pipeline command with ``enable-erase-inverse-ops-pass=false`` added to its pipeline
    options (``--ttir-to-ttnn-runtime-pipeline`` and its ``="..."`` form)."""
    out = []
    for arg in command:
        if arg.startswith("--ttir-to-ttnn-") and "pipeline" in arg:
            flag, _, options = arg.partition("=")
            options = options.strip('"')
            options = " ".join(o for o in options.split() if not o.startswith("enable-erase-inverse-ops-pass="))
            arg = f"{flag}={(options + ' ').lstrip()}enable-erase-inverse-ops-pass=false"
        out.append(arg)
    return tuple(out)


def mask_file(path: Path, masker: Masker) -> None:
    """Rewrite a log with secrets masked, line by line (bounded memory), atomically."""
    tmp = path.with_name(path.name + ".masking")
    with open(path, "rb") as src, open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as dst:
        while chunk := src.readline(1 << 20):
            dst.write(masker.text(chunk.decode("utf-8", errors="surrogateescape")).encode("utf-8", errors="surrogateescape"))
    os.replace(tmp, path)


def _lines(*paths: Path) -> Iterator[str]:
    for path in paths:
        if path.exists():
            with open(path, encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    yield line.rstrip("\n")


def _numbered_head_and_tail(path: Path) -> list[tuple[int, str]]:
    head: list[tuple[int, str]] = []
    tail: collections.deque[tuple[int, str]] = collections.deque(maxlen=STDERR_TAIL_LINES)
    for number, line in enumerate(_lines(path), 1):
        if number <= PROBE_HEAD_LINES:
            head.append((number, line))
        else:
            tail.append((number, line))
    return head + list(tail)


def _output_excerpt(local: Path, limit: int = 64 * 1024) -> str:
    """The end of the attempt's combined output, for the report (full logs stay on disk)."""
    parts = []
    for name in ("stdout.log", "stderr.log"):
        path = local / name
        if path.exists():
            size = path.stat().st_size
            with open(path, "rb") as handle:
                handle.seek(max(0, size - limit // 2))
                parts.append(handle.read().decode("utf-8", errors="replace"))
    return "\n".join(parts)
