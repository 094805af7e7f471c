"""``harness run JOB --slurm CLUSTER``: the job's checks as Slurm jobs, judged and reported as
the SSH path judges and reports them.

The plan is the same (:func:`harness.core.plan.plan`: ``fanout: all`` pins a check to each
node with ``-w``, ``any`` lets Slurm pick); the image is built once and delivered to the nodes
(their registry, else ``docker save | docker load`` over SSH, as the SSH path does); each task
becomes one ``sbatch`` on the login node, over the same SSH transport:

- ``--gres=tenstorrent:<board>:<count>``, the board's partition, ``--constraint`` from the job's
  host labels (nodes carry them as Features), ``--time`` from the check's timeout, and
  ``repeat: N`` as a job array of N elements;
- the job runs the harness's node entry point (:mod:`harness.execution.slurmnode`): the cards
  Slurm allocated, the preflight, the check through the same runner and judge as the SSH path,
  its cases as JSON in the cluster's shared folder.

The executor follows the jobs (``squeue --json``), reads the results, combines the array's
attempts exactly as the runner combines repeats, and hands the cases to the same
:class:`~harness.orchestration.jobrun.ReportWriter` as the SSH path: same JUnit, same summary.
A job Slurm ended without a result (node failure, preemption, ``--time``) is an ``env_fault``
with Slurm's state and reason; one pending past ``--lease-wait`` is cancelled and reported with
Slurm's reason. An environment fault of a pooled check is retried once elsewhere
(``--exclude``). Ctrl-C cancels every job (``scancel``); the nodes' epilog removes the containers.
"""

from __future__ import annotations

import dataclasses
import io
import json
import pickle
import posixpath
import re
import shlex
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Sequence

from harness.core import slurm
from harness.core.events import CheckFinished, CheckStarted, Event, HostQuarantined, Listener, RunStarted, deliver
from harness.core.inventory import Host, Inventory
from harness.core.invocation import needs_card
from harness.core.outcomes import CaseResult, EnvCategory, HarnessErrorKind, Outcome, SuiteResult, Verdict
from harness.core.plan import Task, plan
from harness.core.slurm import JobState, SlurmCluster
from harness.core.spec import CheckSpec, JobSpec
from harness.execution import images
from harness.execution.connect import Connections
from harness.execution.transport import ArtifactError, Transport, TransportError
from harness.orchestration.jobrun import RunReport, utc_now, drive, select_hosts
from harness.orchestration.scheduler import Options, image_verdict, internal_error, not_run

if TYPE_CHECKING:
    from harness.history.store import History

LineSink = Callable[[str], None]
POLL_SECONDS = 1.0
RESULT_GRACE = 10.0  # a job ended, its result not yet visible in the shared folder (NFS)
# How long a result that found its node at fault waits for the job's epilog (the health check
# that drains the node) to end: an epilog that hangs must not hang the run.
EPILOG_WAIT = 120.0
MAX_RESULT_BYTES = 64 * 1024 * 1024  # every result file of one poll, together
MAX_SQUEUE_BYTES = 64 * 1024 * 1024
COMMAND_TIMEOUT = 120.0
MAX_LOG_FILES = 16  # per attempt: stdout, stderr, its report
MAX_LOG_BYTES = 256 * 1024 * 1024
_SAFE_LOG = re.compile(r"logs/[A-Za-z0-9_.@+-]+(/[A-Za-z0-9_.@+-]+)*")  # relative, under logs/ (and no ".." part)
CANCEL_WAIT = 60.0  # seconds to wait for cancelled jobs to leave the nodes
WAITING_REASONS = frozenset({"Resources", "Priority"})  # waiting for cards others hold


class SlurmError(Exception):
    """The cluster cannot take the run (no such cluster, the login node does not answer...)."""


@dataclass
class _Submission:
    """One task (a check on a node or the pool) as one Slurm job; ``repeat: N`` = N elements."""

    key: str
    task: Task
    check: CheckSpec
    attempts: int
    job_id: int | None = None
    results: dict[int, dict] = field(default_factory=dict)  # attempt -> what the node wrote (or a Slurm verdict)
    ended_at: dict[int, float] = field(default_factory=dict)  # attempt -> when Slurm said it ended, result unseen
    seen_at: dict[int, float] = field(default_factory=dict)  # attempt -> when its result was first read
    submitted: float = field(default_factory=time.monotonic)
    started: bool = False

    @property
    def done(self) -> bool:
        return len(self.results) >= self.attempts

    def names(self) -> list[str]:
        return [f"{self.key}.a{n}.json" for n in range(1, self.attempts + 1) if n not in self.results]


@dataclass
class _NodeState:
    host: Host
    cases: dict[str, list[CaseResult]] = field(default_factory=dict)
    properties: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    drained: str | None = None
    stamp: str = ""
    started: float = field(default_factory=time.monotonic)


def cluster_nodes(cluster: SlurmCluster, inventory: Inventory) -> tuple[Host, ...]:
    if cluster.nodes:
        return tuple(inventory.host(name) for name in cluster.nodes)
    return tuple(h for h in inventory.hosts if h.boards)


def run_slurm_job(
    job: JobSpec,
    inventory: Inventory,
    cluster_name: str,
    out_dir: Path,
    *,
    host_names: tuple[str, ...] = (),
    junit_path: Path | None = None,
    on_line: LineSink | None = None,
    environ: Mapping[str, str] | None = None,
    listeners: Sequence[Listener] = (),
    options: Options | None = None,
    started_scheduler: Callable[[object], None] | None = None,
    history: "History | None" = None,
) -> RunReport:
    """Run ``job`` through Slurm cluster ``cluster_name``; the same reports (and history) as
    :func:`~harness.orchestration.jobrun.run_job`."""
    try:
        cluster = inventory.cluster(cluster_name)
    except KeyError:
        names = ", ".join(c.name for c in inventory.clusters) or "none"
        raise SlurmError(f"{inventory.path}: no slurm cluster named {cluster_name!r} (clusters: {names})") from None
    nodes = {h.name for h in cluster_nodes(cluster, inventory)}
    hosts = tuple(h for h in select_hosts(job, inventory, host_names) if h.name in nodes)
    if not hosts:
        raise SlurmError(f"no node of slurm cluster {cluster.name!r} fits job {job.name} (labels, board, --hosts)")
    Connections(inventory).check(hosts)

    def executor(run_id: str, listeners: tuple[Listener, ...]) -> SlurmExecutor:
        return SlurmExecutor(
            job, inventory, cluster, hosts, run_id, listeners=listeners, on_line=on_line,
            options=options or Options(), now=utc_now, log_dir=out_dir / run_id,
        )

    return drive(job, hosts, out_dir, executor, junit_path=junit_path, environ=environ, listeners=listeners,
                 started_scheduler=started_scheduler, history=history)


class SlurmExecutor:
    """Submits, follows and collects; the run source for :func:`~harness.orchestration.jobrun.drive`."""

    def __init__(
        self,
        job: JobSpec,
        inventory: Inventory,
        cluster: SlurmCluster,
        hosts: Sequence[Host],
        run_id: str,
        *,
        listeners: Iterable[Listener] = (),
        on_line: LineSink | None = None,
        options: Options = Options(),
        now: Callable[[], str],
        log_dir: Path | None = None,
    ):
        self.job = job
        self.log_dir = log_dir
        self.inventory = inventory
        self.cluster = cluster
        self.run_id = run_id
        self.listeners = list(listeners)
        self.say = on_line or (lambda line: None)
        self.options = options
        self.now = now
        self.nodes = {h.name: _NodeState(h, stamp=now()) for h in hosts}
        self.run_dir = posixpath.join(cluster.shared_dir, run_id)
        self.subs: list[_Submission] = []
        self.image: str | None = None
        self._lock = threading.RLock()
        self._cancelled = threading.Event()
        self._login: Transport | None = None
        self._serial = 0
        self._nodes_checked = 0.0  # when sinfo was last asked while following
        self._accounted: set[tuple[str, str | None]] = set()  # (check, pinned host) reported
        self._unusable: dict[str, Verdict] = {}  # node -> why the image could not go there

    # -- control (as the Scheduler's) ----------------------------------------------------
    def cancel(self) -> None:
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def emit(self, event: Event) -> None:
        deliver(self.listeners, event, self.say)

    # -- the run -------------------------------------------------------------------------
    def run(self) -> list[SuiteResult]:
        self.emit(RunStarted(self.run_id, self.job.name, tuple(c.name for c in self.job.checks), tuple(self.nodes)))
        planned = list(plan(self.job, tuple(self.nodes)))
        failure: Verdict | None = None
        with Connections(self.inventory) as connections:
            try:
                self._login = connections.transport(self.cluster.login)
                self._mark_drained()
                tasks = self._runnable(planned)
                if tasks and not self.cancelled:
                    self._deliver(connections)
                    tasks = self._runnable(tasks)
                if tasks and not self.cancelled:
                    self._stage()
                    for task in tasks:
                        if self.cancelled:
                            break
                        self._submit(task)
                    self._follow()
            except _Unusable as exc:
                failure = exc.verdict
            except TransportError as exc:
                failure = exc.verdict()
            except SlurmError as exc:
                failure = Verdict.env_fault(EnvCategory.SCHEDULER, str(exc))
            except Exception:
                failure = internal_error("the Slurm executor failed", traceback.format_exc())
            finally:
                self._end(planned, failure)
        return self.suites()

    def _login_run(self, argv: Sequence[str], timeout: float = COMMAND_TIMEOUT, limit: int | None = None) -> tuple[int | None, str]:
        assert self._login is not None
        if limit is None:
            result = self._login.run(list(argv), timeout=timeout)
            return result.exit_status, (result.stdout_tail + ("\n" + result.stderr_tail if result.stderr_tail else "")).strip()
        sink = _Capped(limit)
        result = self._login.run(list(argv), timeout=timeout, stdout_sink=sink)
        if sink.over:
            raise SlurmError(f"{argv[0]} printed more than {limit} bytes on {self.cluster.login.name}")
        return result.exit_status, sink.text() if result.exit_status == 0 else result.stderr_tail.strip()

    def _mark_drained(self) -> None:
        """Nodes Slurm will not give work to, with its reason: their pinned checks cannot run."""
        status, text = self._login_run(["sinfo", "-N", "-h", "-o", "%N|%T|%E"])
        if status != 0:
            raise SlurmError(f"sinfo failed on {self.cluster.login.name}: {text or 'no output'}")
        for line in text.splitlines():
            name, _, rest = line.partition("|")
            state, _, reason = rest.partition("|")
            if name not in self.nodes:
                continue
            if any(w in state for w in ("drain", "down", "fail", "maint")):
                self.nodes[name].drained = f"{state}: {reason}" if reason and reason != "none" else state
            else:
                self.nodes[name].drained = None  # resumed (a health check passed, an admin)

    def _runnable(self, tasks: list[Task]) -> list[Task]:
        out = []
        for task in tasks:
            check = self.job.check(task.check)
            why = self._blocked(task)
            if why is not None:
                self._record(self._home(task), task, [not_run(self.job, check, why)])
            else:
                out.append(task)
        return out

    def _blocked(self, task: Task) -> Verdict | None:
        usable = [s for s in self.nodes.values() if task.may_run_on(s.host.name) and s.drained is None and "unusable" not in s.properties]
        if usable:
            return None
        state = self.nodes[task.host] if task.host else next(iter(self.nodes.values()))
        if "unusable" in state.properties:
            return self._unusable.get(state.host.name)
        return drained_verdict(state.host.name, state.drained or "no usable node")

    def _deliver(self, connections: Connections) -> None:
        """The image, built once, onto every node (their registry, else save|load over SSH)."""
        try:
            rendering = images.render(self.job)
            self.say(f"== {self.job.name}: image {rendering.tag}")
            built = images.ensure_rendered(rendering, on_progress=self.say)
        except images.ImageError as exc:
            raise _Unusable(image_verdict(exc)) from None
        self.image = built.tag
        from concurrent.futures import ThreadPoolExecutor

        def one(state: _NodeState) -> None:
            host = state.host
            try:
                transport = connections.transport(host)
                images.distribute(built, transport, host.registry, on_progress=self.say, docker_argv=images.host_docker_command(host))
                state.properties.update({"image": built.tag, "image.digest": built.digest})
            except images.ImageError as exc:
                self._unusable[host.name] = image_verdict(exc)
            except TransportError as exc:
                self._unusable[host.name] = exc.verdict()
            except Exception:
                self._unusable[host.name] = internal_error(f"delivering the image to {host.name} failed", traceback.format_exc())
            if host.name in self._unusable:
                state.properties["unusable"] = self._unusable[host.name].message

        targets = [s for s in self.nodes.values() if s.drained is None]
        with ThreadPoolExecutor(max_workers=min(16, len(targets)) or 1) as pool:
            list(pool.map(one, targets))

    def _stage(self) -> None:
        """The run's folder in the shared folder (0700: the job spec is read by our jobs only)."""
        status, text = self._login_run(["mkdir", "-p", "-m", "0700", "--", self.run_dir, posixpath.join(self.run_dir, "results")])
        if status != 0:
            raise SlurmError(f"cannot make {self.run_dir} on {self.cluster.login.name}: {text}")

    def _upload(self, check: CheckSpec, key: str) -> str:
        """The job and the check, as the node's runner takes them; inputs beside them."""
        assert self._login is not None
        if check.input is not None:
            remote = posixpath.join(self.run_dir, f"{key}.input-{check.input.name}")
            self._login.put(check.input, remote)
            check = dataclasses.replace(check, input=Path(remote))
        spec = posixpath.join(self.run_dir, f"{key}.spec")
        with tempfile.NamedTemporaryFile(prefix="harness-slurm-", suffix=".spec") as handle:
            pickle.dump((self.job, check), handle)
            handle.flush()
            self._login.put(handle.name, spec)
        return spec

    def _submit(self, task: Task) -> None:
        check = self.job.check(task.check)
        with self._lock:
            self._serial += 1
            key = f"t{self._serial}"
        sub = _Submission(key, task, check, check.repeat)
        spec = self._upload(check, key)
        argv = self.sbatch_argv(sub, spec)
        status, text = self._login_run(argv)
        job_id = text.strip().splitlines()[-1].split(";")[0] if status == 0 and text.strip() else ""
        if not job_id.isdigit():
            verdict = Verdict.env_fault(EnvCategory.SCHEDULER, f"sbatch refused {check.name}: {text.strip()[-300:] or f'exit {status}'}")
            self._record(self._home(task), task, [not_run(self.job, check, verdict)])
            return
        sub.job_id = int(job_id)
        with self._lock:
            self.subs.append(sub)
        where = f" on {task.host}" if task.host else ""
        self.say(f"{check.name}{where}: Slurm job {sub.job_id}" + (f" (array of {sub.attempts})" if sub.attempts > 1 else ""))

    def sbatch_argv(self, sub: _Submission, spec: str) -> list[str]:
        check, task, job = sub.check, sub.task, self.job
        node = [
            *self.cluster.node_command, "run", "--spec", spec, "--check", check.name, "--image", self.image or "",
            "--run-id", self.run_id, "--out", posixpath.join(self.run_dir, "results"), "--key", sub.key,
            "--lease-wait", f"{self.options.lease_wait:g}",
        ]
        array = sub.attempts > 1
        argv = [
            "sbatch", "--parsable", f"--job-name=tt-harness:{job.name}:{check.name}", "--nodes=1", "--ntasks=1",
            "--cpus-per-task=1", f"--time={slurm.time_limit(check.timeout)}",
            f"--output={posixpath.join(self.run_dir, sub.key + ('.%A_%a' if array else '.%j') + '.out')}",
            f"--chdir={self.run_dir}",
        ]
        if job.device is not None:
            partition = self.cluster.partition(job.device.board) or slurm.default_partition(job.device.board)
            argv.append(f"--partition={partition}")
            if needs_card(job, check):
                argv.append(f"--gres={slurm.gres_request(job.device.board, task.devices or job.device.count)}")
        if job.hosts.labels:
            argv.append("--constraint=" + "&".join(slurm.feature(label) for label in job.hosts.labels))
        if task.host is not None:
            argv.append(f"--nodelist={task.host}")
        else:
            # Slurm picks among the cluster's nodes less these: other runs' retries, drained or
            # image-less nodes, and the cluster's nodes this run did not select (--hosts, labels).
            others = {h.name for h in cluster_nodes(self.cluster, self.inventory)} - set(self.nodes)
            avoid = task.excluded | others | {n for n, s in self.nodes.items() if s.drained or "unusable" in s.properties}
            if avoid:
                argv.append(f"--exclude={','.join(sorted(avoid))}")
        if array:
            argv.append(f"--array=1-{sub.attempts}")
        argv.append("--wrap=" + "exec " + shlex.join(node))
        return [a for a in argv if a]

    # -- following ----------------------------------------------------------------------
    def _follow(self) -> None:
        while True:
            with self._lock:
                open_subs = [s for s in self.subs if not s.done]
            if not open_subs or self.cancelled:
                return
            states = self._states()
            self._collect(open_subs, states)
            time.sleep(POLL_SECONDS)

    def _states(self) -> dict[tuple[int, int], JobState]:
        """(job id, array element or 1) -> state, for our jobs Slurm still knows."""
        status, text = self._login_run(["squeue", "--json"], limit=MAX_SQUEUE_BYTES)
        if status != 0:
            raise SlurmError(f"squeue --json failed on {self.cluster.login.name}: {text[-300:]}")
        try:
            data = json.loads(text) if text.strip() else {}
        except ValueError as exc:
            raise SlurmError(f"squeue --json on {self.cluster.login.name} printed no JSON: {exc}") from None
        jobs = data.get("jobs", []) if isinstance(data, dict) else []
        out: dict[tuple[int, int], JobState] = {}
        for job in jobs:
            if not isinstance(job, dict) or not isinstance(job.get("job_id"), int):
                continue
            parsed = slurm.parse_squeue_json(json.dumps({"jobs": [job]}))
            if not parsed:
                continue
            state = next(iter(parsed.values()))
            array_job = job.get("array_job_id")
            task_id = job.get("array_task_id")
            pending_range = job.get("array_task_string") or ""
            if isinstance(array_job, int) and array_job and isinstance(task_id, int) and not pending_range:
                out[(array_job, task_id)] = state
                if job["job_id"] != array_job:
                    out.setdefault((job["job_id"], 1), state)
            elif isinstance(array_job, int) and array_job and pending_range:
                for element in slurm.expand_range(f"[{pending_range.split('%')[0]}]"):
                    out[(array_job, int(element))] = state
            else:
                out[(job["job_id"], 1)] = state
        return out

    def _collect(self, subs: list[_Submission], states: Mapping[tuple[int, int], JobState]) -> None:
        wanted = [name for sub in subs for name in sub.names()]
        found = self._read_results(wanted)
        now = time.monotonic()
        for sub in subs:
            assert sub.job_id is not None
            for attempt in range(1, sub.attempts + 1):
                if attempt in sub.results:
                    continue
                name = f"{sub.key}.a{attempt}.json"
                state = states.get((sub.job_id, attempt))
                if name in found:
                    if settles(found[name], state, now - sub.seen_at.setdefault(attempt, now)):
                        sub.results[attempt] = found[name]
                    continue
                if state is not None and state.state == "RUNNING" and not sub.started:
                    sub.started = True
                    self.emit(CheckStarted(state.nodes or "?", sub.check.name, ()))
                if state is not None and state.state == "PENDING":
                    if _waits_for_nodes(state) and self._nodes_gone(sub, now):
                        break  # reported with Slurm's reason for the node
                    if now - sub.submitted > self.options.lease_wait:
                        self._give_up(sub, attempt, state)
                    continue
                if state is None or state.finished:
                    first = sub.ended_at.setdefault(attempt, now)
                    if now - first > RESULT_GRACE:
                        gone = state or JobState(sub.job_id, "UNKNOWN", "no longer known to Slurm (MinJobAge)")
                        sub.results[attempt] = {"node": gone.nodes, "slurm": slurm.verdict_to_json(slurm.slurm_verdict(gone))}
            if sub.done:
                self._settle(sub)

    def _nodes_gone(self, sub: _Submission, now: float) -> bool:
        """A job waits for nodes that were drained after it was submitted (a health check, an
        admin): if no node it may run on is left, cancel it and report the node's reason."""
        if now - self._nodes_checked > POLL_SECONDS * 5:
            self._nodes_checked = now
            self._mark_drained()
        why = self._blocked(sub.task)
        if why is None:
            return False
        self._login_run(["scancel", str(sub.job_id)])
        for n in range(1, sub.attempts + 1):
            sub.results.setdefault(n, {"node": sub.task.host or "", "slurm": slurm.verdict_to_json(why)})
        return True

    def _give_up(self, sub: _Submission, attempt: int, state: JobState) -> None:
        """A job pending past --lease-wait: cancel it, and say what Slurm was waiting for."""
        self._login_run(["scancel", str(sub.job_id)])
        waited = f"Slurm job {sub.job_id} still pending after {self.options.lease_wait:g} s ({state.reason})"
        category = EnvCategory.DEVICE_BUSY if state.reason in WAITING_REASONS else EnvCategory.SCHEDULER
        verdict = Verdict.env_fault(category, f"{waited}: cancelled")
        for n in range(1, sub.attempts + 1):
            sub.results.setdefault(n, {"node": "", "slurm": slurm.verdict_to_json(verdict)})

    def _read_results(self, names: list[str]) -> dict[str, dict]:
        if not names:
            return {}
        script = 'cd "$1" && shift && for f in "$@"; do [ -f "$f" ] && printf "@@tt-harness@@ %s\\n" "$f" && cat -- "$f"; done; exit 0'
        status, text = self._login_run(
            ["sh", "-c", script, "results", posixpath.join(self.run_dir, "results"), *names], limit=MAX_RESULT_BYTES
        )
        found: dict[str, dict] = {}
        current, body = None, []
        for line in [*text.splitlines(), "@@tt-harness@@ "]:
            if line.startswith("@@tt-harness@@ "):
                if current is not None:
                    try:
                        found[current] = json.loads("\n".join(body))
                    except json.JSONDecodeError:
                        pass  # half written (a non-atomic shared folder): read it next time
                current, body = line.split(" ", 1)[1], []
            else:
                body.append(line)
        return found

    def _settle(self, sub: _Submission) -> None:
        check, task = sub.check, sub.task
        per_attempt: list[list[CaseResult]] = []
        node = None
        node_fault = None
        for attempt in sorted(sub.results):
            record = sub.results[attempt]
            node = node or (record.get("node") if record.get("node") in self.nodes else None)
            self._fetch_logs(record, check, attempt)
            node_fault = node_fault or record.get("node_fault")
            try:
                if "slurm" in record:
                    verdict = slurm.verdict_from_json(record["slurm"])
                    per_attempt.append([not_run(self.job, check, verdict)])
                else:
                    per_attempt.append([slurm.case_from_json(c) for c in record.get("cases", ())])
            except (KeyError, TypeError, ValueError) as exc:
                per_attempt.append([not_run(self.job, check, Verdict.error(
                    HarnessErrorKind.INTERNAL, f"unreadable result from {record.get('node')}: {exc}"))])
        cases = slurm.combine_cases(check.name, check.known_bug, per_attempt)
        state = self.nodes.get(node) if node else None
        state = state or self._home(task)
        if node_fault:
            self._mark_drained()
            if state.drained:
                state.notes.append(f"{check.name}: its preflight failed; after the job's epilog ran the health check, Slurm has the node {state.drained}")
                self.emit(HostQuarantined(state.host.name, f"drained by the harness in Slurm: {state.drained}"))
            else:
                state.notes.append(f"{check.name}: its preflight failed ({node_fault}), but Slurm has not drained the node")
        if self.cancelled:
            return  # reported as cancelled by _cancel_open
        faults = sorted({str(c.verdict.category) for c in cases if c.outcome is Outcome.ENV_FAULT and c.verdict.category})
        if faults and task.host is None and task.retry_of is None:
            retry = dataclasses.replace(task, excluded=task.excluded | {state.host.name}, retry_of=state.host.name)
            if self._blocked(retry) is None:
                state.notes.append(f"{task.check}: env_fault/{faults[0]}, retried on another node")
                self.emit(CheckFinished(state.host.name, task.check, (), f"env_fault/{faults[0]}: retried on another node"))
                self._submit(retry)
                return
        note = f"retry after an environment fault on {task.retry_of}" if task.retry_of else ""
        self._record(state, task, cases, note)

    def _fetch_logs(self, record: Mapping, check: CheckSpec, attempt: int) -> None:
        """An attempt's logs from the shared folder to ``<out>/<run id>/<node>/<check>/attempt-N/``,
        where the SSH path keeps them. Best effort: the case already carries its output."""
        node, files = record.get("node"), record.get("logs")
        if self.log_dir is None or node not in self.nodes or not isinstance(files, list) or self._login is None:
            return
        local = self.log_dir / str(node) / check.name / f"attempt-{attempt}"
        for rel in files[:MAX_LOG_FILES]:
            if not isinstance(rel, str) or not _SAFE_LOG.fullmatch(rel) or ".." in rel.split("/"):
                continue
            try:
                local.mkdir(parents=True, exist_ok=True)
                self._login.get(posixpath.join(self.run_dir, "results", rel), local / posixpath.basename(rel), MAX_LOG_BYTES)
            except (TransportError, ArtifactError, OSError) as exc:
                self.say(f"harness: could not fetch {rel} of {check.name}: {exc}")

    # -- endings ------------------------------------------------------------------------
    def _end(self, planned: list[Task], failure: Verdict | None) -> None:
        """Cancel every job still open (Ctrl-C, a failure of the executor), wait for Slurm to
        end them (the nodes' epilog removes their containers), and report every check that has
        no result: skipped when cancelled, else ``failure``."""
        with self._lock:
            open_subs = [s for s in self.subs if not s.done and s.job_id is not None]
        ids = [str(s.job_id) for s in open_subs]
        if ids and self._login is not None:
            try:
                self._login_run(["scancel", *ids])
                mine = {s.job_id for s in open_subs}
                deadline = time.monotonic() + CANCEL_WAIT
                while time.monotonic() < deadline:
                    if not any(k[0] in mine and not v.finished for k, v in self._states().items()):
                        break
                    time.sleep(POLL_SECONDS)
            except Exception as exc:  # the report must still be written: say what is left to do
                self.say(f"harness: cancelling Slurm jobs {', '.join(ids)} failed: {exc}; `scancel` them by hand")
        verdict = failure or Verdict(Outcome.SKIP, message="not run: the run was cancelled")
        for sub in open_subs:
            sub.results.update({n: {} for n in range(1, sub.attempts + 1)})
            why = failure or Verdict(Outcome.SKIP, message=f"cancelled: Slurm job {sub.job_id} was cancelled")
            self._record(self._home(sub.task), sub.task, [not_run(self.job, sub.check, why)])
        for task in planned:
            if (task.check, task.host) not in self._accounted:
                self._record(self._home(task), task, [not_run(self.job, self.job.check(task.check), verdict)])

    def _home(self, task: Task) -> _NodeState:
        if task.host is not None:
            return self.nodes[task.host]
        if task.retry_of:
            return self.nodes[task.retry_of]
        return next(iter(self.nodes.values()))

    def _record(self, state: _NodeState, task: Task, cases: list[CaseResult], note: str = "") -> None:
        with self._lock:
            self._accounted.add((task.check, task.host))
            state.cases.setdefault(task.check, []).extend(cases)
            if note:
                state.notes.append(f"{task.check}: {note}")
        self.emit(CheckFinished(state.host.name, task.check, tuple(cases), note))

    def suites(self) -> list[SuiteResult]:
        with self._lock:
            suites = []
            for state in self.nodes.values():
                cases = [case for check in self.job.checks for case in state.cases.get(check.name, ())]
                properties = {"host": state.host.name, "board": ",".join(state.host.board_types()) or "none",
                              "slurm.cluster": self.cluster.name}
                properties.update({k: v for k, v in state.properties.items() if k != "unusable"})
                if state.drained:
                    properties["quarantined"] = f"drained in Slurm: {state.drained}"
                for i, note in enumerate(state.notes):
                    properties[f"note.{i + 1}"] = note
                suites.append(SuiteResult(self.job.name, state.host.name, tuple(cases), properties, state.stamp, time.monotonic() - state.started))
            return suites


def _waits_for_nodes(state: JobState) -> bool:
    """Pending because its nodes are drained or down, not because cards are busy."""
    return state.reason.startswith(("ReqNodeNotAvail", "NodeDown")) or "DRAINED" in state.reason or "DOWN" in state.reason


class _Unusable(Exception):
    def __init__(self, verdict: Verdict):
        super().__init__(verdict.message)
        self.verdict = verdict


def settles(record: Mapping, state: JobState | None, waited: float) -> bool:
    """Whether a job's result is final. One that found its node at fault waits for the job to
    end (its epilog drains the node), so the report and the next task see the node as Slurm
    does; for at most EPILOG_WAIT seconds after it appeared."""
    epilog_running = bool(record.get("node_fault")) and state is not None and not state.finished
    return not epilog_running or waited > EPILOG_WAIT


def drained_verdict(node: str, why: str) -> Verdict:
    """A node Slurm will not run work on, as the env_fault of the checks pinned to it. A reason
    the harness wrote names the failed preflight checks: the first one's category is the fault."""
    category = EnvCategory.SCHEDULER
    reason = why.split(": ", 1)[1] if ": " in why else why
    if reason.startswith(slurm.DRAIN_PREFIX):
        first = reason[len(slurm.DRAIN_PREFIX):].replace("preflight failed:", "").strip().split(":", 1)[0].strip()
        category = _CHECK_CATEGORY.get(first, category)
    return Verdict.env_fault(category, f"not run: Slurm node {node} is {why}")


class _Capped(io.RawIOBase):
    """A bytes sink that keeps at most ``limit`` bytes and says whether more came."""

    def __init__(self, limit: int):
        self.limit, self.data, self.over = limit, bytearray(), False

    def writable(self) -> bool:
        return True

    def write(self, chunk) -> int:
        room = self.limit - len(self.data)
        if len(chunk) > room:
            self.over = True
        self.data += bytes(chunk[: max(0, room)])
        return len(chunk)

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


def _check_categories() -> dict[str, EnvCategory]:
    """Preflight check name -> the env_fault category it stands for (the drain reason names checks)."""
    return {c.value: c for c in EnvCategory} | {
        "kmd": EnvCategory.DRIVER_MISSING, "driver": EnvCategory.DRIVER_MISSING, "devices": EnvCategory.DEVICE_MISSING,
        "device": EnvCategory.DEVICE_MISSING, "busy": EnvCategory.DEVICE_BUSY, "heartbeat": EnvCategory.DEVICE_HANG,
    }


_CHECK_CATEGORY = _check_categories()
