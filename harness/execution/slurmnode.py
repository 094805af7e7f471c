"""The harness on a Slurm node: health check, epilog, and the entry point a job runs.

``python -m harness.execution.slurmnode healthcheck|epilog|run ...`` (``harness slurm
healthcheck`` and ``harness slurm epilog`` run the same functions). It imports no Docker SDK and
no CLI: a node needs Python with PyYAML, defusedxml, junit-xml and paramiko (Debian packages).

- **healthcheck** (``HealthCheckProgram``): the harness's preflight on this node, for the cards
  gres.conf gives it. A fault drains the node with a reason starting ``[tt-harness]`` naming the
  failed checks; once the checks pass again it resumes the node, only if the harness drained it
  (a node drained by an admin stays drained). A card held by a running job is not a fault here.
- **epilog** (``Epilog``): kills and removes the containers of the job that ended (label
  ``slurm.job=<id>``): ``scancel`` stops the job's processes, not a container dockerd started.
  When the job's own preflight found the node at fault (it exits ``NODE_FAULT_EXIT``), the epilog
  runs the health check at once, so the node is drained before the job's card is released.
- **run** (a job's script): the cards Slurm allocated (``scontrol -d show job``: generic GRES sets
  no variable naming them), the preflight, then the check through the same
  :class:`~harness.execution.runner.Runner` as the SSH path, on exactly those
  ``/dev/tenstorrent/N``; the cases go as JSON into the shared folder. A failed preflight reports
  the environment fault and leaves the drain to the epilog: a job runs as its user, and only
  Slurm's operators may drain a node.
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import json
import os
import pickle
import socket
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Sequence

from harness.core import slurm
from harness.core.lease import DEFAULT_WAIT as DEFAULT_LEASE_WAIT
from harness.core.outcomes import CaseResult, EnvCategory, HarnessErrorKind, Verdict

# The runner, preflight and transports (paramiko among them) load in the commands that use
# them: the epilog runs after every job and holds the node's cards until it ends, so it stays light.

GRES_CONF = "/etc/slurm/gres.conf"
COMMAND_TIMEOUT = 60
MAX_OUTPUT = 1 << 20  # scontrol's answer about one job or node is a few KiB
# A card held by a job is how a busy node looks: the health check runs beside jobs.
NOT_A_NODE_FAULT = frozenset({EnvCategory.DEVICE_BUSY})
# The entry point's status when its preflight found the node at fault (the harness's env_fault
# exit code): the epilog reads it from Slurm and runs the health check.
NODE_FAULT_EXIT = 3
# One health check at a time on a node: one started before a fault must not resume the node
# that one started after it has just drained.
HEALTHCHECK_LOCK = "/run/tt-harness-healthcheck.lock"


def node_name() -> str:
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def node_host(name: str, gres_conf: str):
    """This node as an inventory host: its cards are the ones gres.conf gives it."""
    from harness.core.inventory import BoardSlot, Host

    by_board: dict[str, list[int]] = {}
    for board, device in slurm.gres_devices(gres_conf, name):
        by_board.setdefault(board or "n150", []).append(device)
    # One slot per device: the preflight checks each /dev/tenstorrent/N Slurm may hand out.
    boards = tuple(BoardSlot(board, (device,)) for board, devices in by_board.items() for device in devices)
    return Host(name=name, transport="local", boards=boards)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(1 << 20)
    except OSError:
        return ""


def _run(argv: Sequence[str]) -> tuple[int | None, str]:
    """A short command's status and whole output (scontrol's records are read in full: a
    transport keeps only the tail, and an array's records come before this element's)."""
    try:
        done = subprocess.run(list(argv), capture_output=True, timeout=COMMAND_TIMEOUT, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, str(exc)
    text = (done.stdout[:MAX_OUTPUT] + done.stderr[-4096:]).decode("utf-8", errors="replace")
    return done.returncode, text.strip()


# -- healthcheck ---------------------------------------------------------------------------


def healthcheck(node: str | None = None, gres_conf: str = GRES_CONF, say=print) -> int:
    """Drain this node if its preflight fails; resume it if the harness drained it and it passes."""
    node = node or node_name()
    try:
        lock = open(HEALTHCHECK_LOCK, "a")  # root's folder: Slurm runs health checks and epilogs as root
    except OSError:
        return _healthcheck(node, gres_conf, say)  # run by hand as a user: nothing to race with
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _healthcheck(node, gres_conf, say)


def _healthcheck(node: str, gres_conf: str, say) -> int:
    from harness.execution.preflight import preflight
    from harness.execution.transport import LocalTransport

    transport = LocalTransport(node)
    report = preflight(transport, node_host(node, _read(gres_conf)))
    failed = [f"{c.name}: {c.reason}" for c in report.faults if c.category not in NOT_A_NODE_FAULT]
    status, text = _run(["scontrol", "show", "node", node])
    if status != 0:
        say(f"tt-harness healthcheck: scontrol show node {node} failed: {text}")
        return 0  # a non-zero HealthCheckProgram changes nothing; say why in slurmd's log
    flags, reason = slurm.node_state(text)
    if failed:
        wanted = slurm.drain_reason(failed)
        if slurm.is_drained(flags) and not slurm.drained_by_us(flags, reason):
            say(f"tt-harness healthcheck: {node} already drained by someone else ({reason}); left as is")
            return 0
        if reason != wanted:
            status, text = _run(["scontrol", "update", f"nodename={node}", "state=drain", f"reason={wanted}"])
            say(f"tt-harness healthcheck: drained {node}: {wanted}" + ("" if status == 0 else f" (scontrol: {text})"))
        return 0
    if slurm.drained_by_us(flags, reason):
        status, text = _run(["scontrol", "update", f"nodename={node}", "state=resume"])
        say(f"tt-harness healthcheck: {node} passes again: resumed" + ("" if status == 0 else f" (scontrol: {text})"))
    return 0


# -- epilog --------------------------------------------------------------------------------


def epilog(job_id: str | None = None, docker: Sequence[str] = ("docker",), say=print) -> int:
    """Kill and remove the containers of job ``job_id`` ($SLURM_JOB_ID). Always exit 0: a failed
    Epilog drains the node, and a node without Docker has no container to leave behind."""
    job_id = job_id or os.environ.get("SLURM_JOB_ID", "")
    if not job_id.isdigit():
        say("tt-harness epilog: no SLURM_JOB_ID; nothing to do")
        return 0
    def docker_do(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*docker, *args], capture_output=True, text=True, timeout=COMMAND_TIMEOUT, stdin=subprocess.DEVNULL)

    try:
        found = docker_do("ps", "-aq", "--filter", f"label={slurm.JOB_LABEL}={job_id}")
        ids = found.stdout.split() if found.returncode == 0 else []
        if ids:
            removed = docker_do("rm", "-f", *ids)
            say(f"tt-harness epilog: job {job_id}: removed {len(ids)} container(s)"
                + ("" if removed.returncode == 0 else f": {removed.stderr.strip()[-300:]}"))
    except (OSError, subprocess.TimeoutExpired) as exc:
        say(f"tt-harness epilog: job {job_id}: {exc}")
    status, text = _run(["scontrol", "show", "job", job_id])
    if status == 0 and slurm.job_exit_status(text) == NODE_FAULT_EXIT:
        say(f"tt-harness epilog: job {job_id} found this node at fault: health check")
        healthcheck(say=say)
    return 0


# -- run -----------------------------------------------------------------------------------


def slurm_runner(*args, job_id: str, **kwargs):
    """The SSH path's runner, on the node itself: every container also carries the Slurm job
    id, so the epilog finds what ``scancel`` left running."""
    from harness.core.invocation import docker_run_argv, needs_card
    from harness.core.lease import leased_argv
    from harness.execution.runner import Runner

    class SlurmRunner(Runner):
        def _docker_run(self, check, number, workdir, devices, name):
            argv = docker_run_argv(
                self.job, check, self.image_ref, run_id=self.run_id, attempt=number, host_workdir=workdir,
                device_ids=devices, iommu=self.host.iommu, has_path=self.host.has_path,
                leased=devices if needs_card(self.job, check) else None, name=name,
            )
            argv = [argv[0], argv[1], "--label", f"{slurm.JOB_LABEL}={job_id}", *argv[2:]]
            held = devices if needs_card(self.job, check) else ()
            return leased_argv([*self.host.docker, *argv[1:]], name=name, devices=held, wait=self.lease_wait, docker=self.host.docker)

    return SlurmRunner(*args, **kwargs)


def run(spec: Path, check_name: str, image: str, run_id: str, out: Path, key: str, lease_wait: float) -> int:
    """One attempt of one check on the cards Slurm gave this job; its cases into ``out``."""
    node = node_name()
    job_id = os.environ.get("SLURM_JOB_ID", "")
    attempt = int(os.environ.get("SLURM_ARRAY_TASK_ID") or 1)
    result_path = out / f"{key}.a{attempt}.json"
    record: dict = {"node": node, "job_id": job_id, "attempt": attempt, "devices": [], "node_fault": None}
    try:
        with open(spec, "rb") as handle:
            job, check = pickle.load(handle)  # written by this user's orchestrator, in a 0700 folder
        record["cases"] = [slurm.case_to_json(c) for c in _run_check(job, check, node, job_id, image, run_id, out, attempt, lease_wait, record)]
        logs = out / "logs" / f"{check.name}.{job_id}"
        # The attempt's logs and reports, relative to OUT, for the orchestrator to fetch.
        record["logs"] = sorted(str(p.relative_to(out)) for p in logs.rglob("*") if p.is_file()) if logs.is_dir() else []
    except Exception:
        trace = traceback.format_exc()
        verdict = Verdict.error(
            HarnessErrorKind.INTERNAL,
            f"the node entry point on {node} failed: {trace.strip().splitlines()[-1]} (a bug in tt-harness, or a node "
            "whose harness differs from the orchestrator's)",
        )
        record["cases"] = [slurm.case_to_json(CaseResult(check_name, check_name, verdict, check=check_name))]
        print(trace, file=sys.stderr)
    from harness.core.atomic import write_text

    write_text(result_path, json.dumps(record) + "\n")
    return NODE_FAULT_EXIT if record["node_fault"] else 0


def _run_check(job, check, node, job_id, image, run_id, out, attempt, lease_wait, record) -> list[CaseResult]:
    from harness.core.inventory import BoardSlot, Host
    from harness.core.invocation import needs_card
    from harness.execution.preflight import preflight
    from harness.execution.runner import HostContext
    from harness.execution.transport import LocalTransport

    transport = LocalTransport(node)
    card = needs_card(job, check)
    devices: tuple[int, ...] = ()
    if card:
        # An array element by its own name: the array's id would list every element.
        array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
        status, text = _run(["scontrol", "-d", "show", "job", f"{array}_{task}" if array and task else job_id])
        devices = slurm.allocated_devices(text, node, job_id) if status == 0 else ()
        if not devices:
            verdict = Verdict.env_fault(
                EnvCategory.SCHEDULER, f"Slurm job {job_id} on {node} holds no tenstorrent card (scontrol -d show job: {text[-300:]})"
            )
            return [CaseResult(check.name, f"{job.name}.{check.name}", verdict, check=check.name)]
    record["devices"] = list(devices)
    host = Host(name=node, transport="local", boards=tuple(BoardSlot(job.device.board if job.device else "n150", (d,)) for d in devices))
    report = preflight(transport, host)
    if report.blocking(card):
        failed = [f"{c.name}: {c.reason}" for c in report.blocking(card) if c.category not in NOT_A_NODE_FAULT]
        record["node_fault"] = slurm.drain_reason(failed) if failed else None
        verdict = report.verdict(card)
        return [CaseResult(check.name, f"{job.name}.{check.name}", verdict, check=check.name)]
    facts = report.facts
    context = HostContext(
        name=node, device_ids=devices, iommu=bool(facts.iommu) if facts else False,
        has_path=facts.has_path if facts else None,
    )
    runner = slurm_runner(
        job, transport, context, image, run_id, out / "logs" / f"{check.name}.{job_id}", lease_wait=lease_wait, job_id=job_id,
    )
    one = dataclasses.replace(check, repeat=1)  # each attempt is one element of the job array
    try:
        return runner.run_check(one, devices)
    finally:
        runner.remove_leftovers()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tt-harness-node", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("healthcheck", help="HealthCheckProgram: drain/resume this node by its preflight")
    sub.add_parser("epilog", help="Epilog: remove the containers of $SLURM_JOB_ID")
    one = sub.add_parser("run", help="a job's entry point: one attempt of one check")
    one.add_argument("--spec", type=Path, required=True)
    one.add_argument("--check", required=True)
    one.add_argument("--image", required=True)
    one.add_argument("--run-id", required=True)
    one.add_argument("--out", type=Path, required=True)
    one.add_argument("--key", required=True)
    one.add_argument("--lease-wait", type=float, default=DEFAULT_LEASE_WAIT)
    args = parser.parse_args(argv)
    if args.command == "healthcheck":
        return healthcheck()
    if args.command == "epilog":
        return epilog()
    return run(args.spec, args.check, args.image, args.run_id, args.out, args.key, args.lease_wait)


if __name__ == "__main__":
    sys.exit(main())
