"""The history end to end on the simulated lab: runs recorded by `harness run` as a user starts
it, and `harness history` reading them back and blaming the host that lost its hugepages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.history.store import History
from harness.lab.sim import SimLab, host_name
from tests.jobspec import write_lab_job
from tests.labfixtures import E2E_LAB

pytestmark = [pytest.mark.docker, pytest.mark.ssh]

REPO = Path(__file__).resolve().parents[1]
H1, H2 = host_name(E2E_LAB, 1), host_name(E2E_LAB, 2)


def run(lab: SimLab, job: Path, out: Path, history: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness", "run", str(job), "--inventory", str(lab.inventory_path), "--out", str(out),
         "--hosts", f"{H1},{H2}", "--quiet", "--history", history],
        cwd=REPO, capture_output=True, text=True, timeout=900, env=dict(os.environ),
    )


def test_lab_runs_are_recorded_and_a_host_fault_is_blamed_on_the_host(sim_lab: SimLab, tmp_path: Path):
    job = write_lab_job(tmp_path, name="hist", checks="""\
        - {name: device-smoke, kind: gtest, binary: build/test/tt_metal/sim_device_smoke, timeout: 2m}
        """)
    history = str(tmp_path / "history.sqlite")
    healthy = run(sim_lab, job, tmp_path / "out1", history)
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    sim_lab.fault(H2, "no-hugepages")
    try:
        broken = run(sim_lab, job, tmp_path / "out2", history)
    finally:
        sim_lab.heal(H2)
    assert broken.returncode == 3, broken.stdout + broken.stderr

    with History.open(history) as store:
        runs = store.runs()
        assert [r.exit_code for r in runs] == [3, 0]
        cases = store.cases([r.run_id for r in runs])
    first = [c for c in cases if c.run_id == runs[1].run_id]
    assert {(c.host, c.outcome.value, c.board, c.device) for c in first} == {(H1, "pass", "n150", "0"), (H2, "pass", "n150", "0")}
    assert all(c.image_digest.startswith("sha256:") for c in first)  # the image each host ran, from ImageReady
    assert runs[1].image_digest == first[0].image_digest
    second = {c.host: c for c in cases if c.run_id == runs[0].run_id}
    assert (second[H2].outcome.value, second[H2].category) == ("env_fault", "hugepages")

    shown = subprocess.run([sys.executable, "-m", "harness", "history", "--json", "--history", history],
                           cwd=REPO, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    (flaky,) = report["flaky"]
    assert (flaky["check"], flaky["cause"], flaky["subject"]) == ("device-smoke", "host", H2)
    hosts = {h["host"]: h for h in report["hosts"]}
    assert hosts[H2]["categories"] == {"hugepages": 1} and hosts[H1]["env_faults"] == 0
