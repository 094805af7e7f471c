"""One job across its hosts: preflight, build, distribute, run, report.

Hosts run one after another (concurrent fan-out is the scheduler's, later). The order is
cheapest-first: a host that fails preflight runs nothing and costs no image build; an image
that cannot be built or delivered turns every check planned there into an environment fault
naming why. Every check planned on a host appears in that host's suite, run or not.
"""

from __future__ import annotations

import datetime
import json
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from harness.core import junit
from harness.core.atomic import write_text
from harness.core.errors import InputError
from harness.core.hostfacts import PreflightReport
from harness.core.invocation import needs_card
from harness.core.inventory import Host, Inventory
from harness.core.outcomes import (
    CaseResult,
    EnvCategory,
    Evidence,
    Outcome,
    SuiteResult,
    Verdict,
    exit_code,
    summarize,
)
from harness.core.secretref import secret_name
from harness.core.spec import CheckSpec, JobSpec
from harness.execution import images
from harness.execution.connect import Connections
from harness.execution.preflight import preflight
from harness.execution.runner import HostContext, Runner
from harness.execution.transport import TransportError

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
            "counts": dict(summarize(self.outcomes)),
            "hosts": [
                {
                    "host": suite.host,
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
) -> RunReport:
    """Run ``job`` on its hosts; write the JUnit feed and ``summary.json`` (atomically) to
    ``out_dir``, and each attempt's logs and artifacts under ``out_dir/<run id>/<host>/<check>``.
    ``on_line`` gets progress (steps, image builds), ``on_output`` the checks' own output."""
    hosts = select_hosts(job, inventory, host_names)
    run_id = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)
    started = _now()
    say = on_line or (lambda line: None)
    plan = _plan(job, hosts)
    built: images.BuiltImage | images.ImageError | None = None
    suites = []
    with Connections(inventory) as connections:
        for host in hosts:
            host_started = time.monotonic()
            stamp = _now()
            checks = plan[host.name]
            transport = connections.transport(host)
            say(f"== {job.name} on {host.name}: preflight")
            report = preflight(transport, host, root=root, probe_paths=_mount_sources(job))
            properties = _properties(job, host, report)
            # A card fault blocks the checks that use the card; a compiler check still runs.
            by_check: dict[str, list[CaseResult]] = {}
            runnable = []
            for check in checks:
                card = needs_card(job, check)
                if report.blocking(card):
                    by_check[check.name] = _not_run(job, (check,), report.verdict(card))
                else:
                    runnable.append(check)
            if runnable:
                if built is None:
                    built = _build(job, say)
                ran, properties = _run_on_host(
                    job, host, transport, report, built, tuple(runnable), run_id, out_dir, say, on_output, environ, properties
                )
                by_check.update(ran)
            cases = [case for check in checks for case in by_check[check.name]]
            suites.append(
                SuiteResult(job.name, host.name, tuple(cases), properties, stamp, time.monotonic() - host_started)
            )
    result = RunReport(
        run_id, job.name, tuple(suites), started, _now(), tuple(c.name for c in job.checks), out_dir / run_id
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    redact = [value for key, value in (environ or {}).items() if _is_secret_used(job, key)]
    junit.write(junit_path or out_dir / "junit.xml", result.suites, name=f"tt-harness {job.name}", redact=redact)
    write_text(out_dir / "summary.json", json.dumps(result.summary(), indent=2) + "\n")
    return result


def _plan(job: JobSpec, hosts: tuple[Host, ...]) -> dict[str, tuple[CheckSpec, ...]]:
    """Which checks run where: every check on every host (fanout all), or shared round-robin (any)."""
    if job.hosts.fanout == "all":
        return {host.name: job.checks for host in hosts}
    plan: dict[str, list[CheckSpec]] = {host.name: [] for host in hosts}
    for i, check in enumerate(job.checks):
        plan[hosts[i % len(hosts)].name].append(check)
    return {name: tuple(checks) for name, checks in plan.items()}


def _build(job: JobSpec, say: LineSink) -> images.BuiltImage | images.ImageError:
    try:
        say(f"== {job.name}: image {images.image_tag(job)}")
        return images.ensure_image(job, on_progress=say)
    except images.ImageError as exc:
        return exc


def _run_on_host(job, host, transport, report, built, checks, run_id, out_dir, say, on_output, environ, properties):
    """Deliver the image and run ``checks``; their cases by check name, and the suite's properties."""

    def none_ran(verdict: Verdict) -> dict[str, list[CaseResult]]:
        return {check.name: _not_run(job, (check,), verdict) for check in checks}

    if isinstance(built, images.ImageError):
        return none_ran(_image_verdict(built)), properties
    image_ref = built.tag
    properties = {**properties, "image": built.tag, "image.digest": built.digest}
    if not (host.transport == "local" and host.docker is None):
        try:
            delivered = images.distribute(built, transport, host.registry, on_progress=say, docker_argv=images.host_docker_command(host))
            properties["image.delivery"] = str(delivered.delivery)
            properties["image.digest"] = delivered.digest
        except images.ImageError as exc:
            return none_ran(_image_verdict(exc)), properties
        except TransportError as exc:
            return none_ran(exc.verdict()), properties
    facts = report.facts
    context = HostContext(
        name=host.name,
        device_ids=host.device_ids,
        iommu=bool(facts.iommu) if facts else False,
        has_path=facts.has_path if facts else None,
        docker=images.host_docker_command(host),
    )
    runner = Runner(job, transport, context, image_ref, run_id, out_dir / run_id / host.name, on_line=on_output, secrets=environ)
    cases: dict[str, list[CaseResult]] = {}
    for check in checks:
        say(f"== {job.name} on {host.name}: {check.name}")
        cases[check.name] = runner.run_check(check)
    try:
        runner.remove_leftovers()
    except TransportError:
        pass  # the host is gone again; the next run's leftover sweep finds them by label
    return cases, properties


def _not_run(job: JobSpec, checks: tuple[CheckSpec, ...], verdict: Verdict) -> list[CaseResult]:
    """One synthetic case per planned check: never an empty report, never a silent skip."""
    return [
        junit.synthetic_case(check.name, verdict, job=job.name)
        for check in checks
    ]


def _image_verdict(exc: images.ImageError) -> Verdict:
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



def _is_secret_used(job: JobSpec, variable: str) -> bool:
    return any(secret_name(value) == variable for check in job.checks for value in check.env.values())


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
