"""The scheduler's pure parts (plan, allocation, leases, preflight blocking) and its failure
boundary, without a lab (see test_scheduler_lab.py for the lab)."""

from __future__ import annotations

import json
import subprocess
import textwrap
import threading
import time
from pathlib import Path

import pytest

from harness.core.hostfacts import PreflightReport, fault
from harness.core.lease import BUSY_EXIT, leased_argv
from harness.core.outcomes import EnvCategory, HarnessErrorKind, Outcome
from harness.core.plan import Task, allocate, plan
from harness.core.spec import load_job
from harness.core.inventory import load_inventory
from harness.execution.runner import Runner
from harness.execution.transport import Lifeline, LocalTransport
from harness.orchestration.jobrun import run_job

REPO = Path(__file__).resolve().parents[1]


def write_job(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(textwrap.dedent(body))
    return path


def test_plan_pins_every_check_to_every_host_or_pools_them(tmp_path):
    spec = """\
        name: p
        image: {{project: tt-metal-sim, base: tt-harness/debian:bookworm, path: {path}}}
        device: {{arch: wormhole_b0, board: n150, count: 2}}
        hosts: {{fanout: {fanout}}}
        checks:
          - {{name: card, kind: command, command: ["true"]}}
          - {{name: compiler, kind: command, command: ["true"], profile: none}}
        """
    standin = REPO / "harness" / "lab" / "standin"
    every = plan(load_job(write_job(tmp_path, spec.format(path=standin, fanout="all"))), ("h1", "h2"))
    assert [(t.check, t.host, t.devices) for t in every] == [
        ("card", "h1", 2), ("card", "h2", 2), ("compiler", "h1", 0), ("compiler", "h2", 0)
    ]
    pooled = plan(load_job(write_job(tmp_path, spec.format(path=standin, fanout="any"))), ("h1", "h2"))
    assert [(t.check, t.host) for t in pooled] == [("card", None), ("compiler", None)]


def test_allocate_takes_free_cards_shares_when_allowed_and_waits_otherwise():
    exclusive = Task("c", None, 2)
    assert allocate(exclusive, (0, 1, 2, 3), {0: 1}) == (1, 2)
    assert allocate(exclusive, (0, 1), {0: 1}) is None  # wait for card 0
    assert allocate(Task("c", None, 1, shared=True), (0, 1), {0: 2, 1: 1}) == (1,)
    assert allocate(Task("c", None, 0), (), {}) == ()
    with pytest.raises(ValueError):
        allocate(Task("c", None, 3), (0, 1), {})


def test_a_cardless_check_is_blocked_by_docker_not_by_the_driver():
    """Regression: a compiler-only job on a host whose preflight found a driver fault and a
    Docker fault was reported as env_fault/driver-missing, though only Docker blocked it."""
    report = PreflightReport("h", (
        fault("kmd", EnvCategory.DRIVER_MISSING, "no tt-kmd"),
        fault("docker", EnvCategory.DOCKER, "engine down"),
    ))
    assert report.verdict(needs_card=False).category is EnvCategory.DOCKER
    assert report.verdict(needs_card=True).category is EnvCategory.DRIVER_MISSING
    assert not PreflightReport("h", (fault("kmd", EnvCategory.DRIVER_MISSING, "no tt-kmd"),)).blocking(needs_card=False)


def test_a_lease_is_exclusive_waits_then_gives_up_and_dies_with_its_holder(tmp_path):
    """The real lease wrapper with the real flock(1), on this machine."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "docker").write_text("#!/bin/sh\n[ \"$1\" = run ] && exec sleep 30\necho \"docker $*\" >> \"$0.log\"\n")
    (fake / "docker").chmod(0o755)
    docker = (str(fake / "docker"),)
    device = 9000 + (time.time_ns() % 1000)  # a card number no other test uses
    transport = LocalTransport()
    argv = leased_argv([*docker, "run", "x"], name="c1", devices=[device], wait=1, docker=docker)
    first = Lifeline()
    holder = threading.Thread(target=lambda: transport.run(argv, timeout=60, stdin=first))
    holder.start()
    time.sleep(1.0)
    busy = transport.run(leased_argv([*docker, "run", "y"], name="c2", devices=[device], wait=1, docker=docker), timeout=30)
    assert busy.exit_status == BUSY_EXIT and "harness-lease: waiting for" in busy.stderr_tail
    first.cut()  # the harness is gone: the host removes the container and gives up the lease
    holder.join(timeout=30)
    assert "docker rm -f c1" in (fake / "docker.log").read_text()
    free = subprocess.run(["flock", "-n", f"/tmp/tt-harness-leases/device-{device}.lock", "true"])
    assert free.returncode == 0


def test_a_harness_exception_is_an_error_with_its_traceback_and_the_report_is_written(tmp_path, monkeypatch):
    """The failure boundary: a bug of the harness while running a check (injected here) is
    error/internal for that check, the other checks still run, and JUnit and summary exist."""
    job = load_job(write_job(tmp_path, f"""\
        name: boundary
        image: {{project: tt-metal-sim, base: tt-harness/debian:bookworm, path: {REPO / "harness" / "lab" / "standin"}}}
        checks:
          - {{name: breaks, kind: command, command: ["true"]}}
          - {{name: works, kind: command, command: ["true"]}}
        """))
    inventory = tmp_path / "local.yaml"
    inventory.write_text("hosts:\n  - {name: here, transport: local}\n")
    real = Runner.run_check

    def run_check(self, check, devices=None):
        if check.name == "breaks":
            raise RuntimeError("boom: an injected harness bug")
        return real(self, check, devices)

    monkeypatch.setattr(Runner, "run_check", run_check)
    report = run_job(job, load_inventory(inventory), tmp_path / "out")
    by_name = {case.check: case for suite in report.suites for case in suite.cases}
    broken = by_name["breaks"]
    assert broken.outcome is Outcome.ERROR and broken.verdict.category is HarnessErrorKind.INTERNAL
    assert "boom: an injected harness bug" in broken.verdict.message
    assert any("Traceback" in e.text or "run_check" in e.text for e in broken.verdict.evidence)
    assert by_name["works"].outcome is Outcome.PASS
    assert report.exit_code == 1
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["counts"]["error"] == 1
    assert "harness/internal" in (tmp_path / "out" / "junit.xml").read_text()
