"""End to end on the simulated lab: the harness against STAND-IN Wormhole hosts over real SSH.

Every check runs as on a real lab: `harness run` in a subprocess, preflight over SSH, the
simulated tt-metal image built by the harness's image builder and delivered with `docker save |
docker load` into each host's own engine, containers started there with the profile's mounts.
What is simulated is only the card (harness/lab/hostimage/tt-sim) and the tools that use it
(harness/lab/standin): every verdict below is computed, none is canned.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.lab.faults import default_faults
from harness.lab.sim import LAB_LABEL, SimLab, host_name
from tests.jobspec import write_lab_job
from tests.labfixtures import E2E_LAB, cases

pytestmark = [pytest.mark.docker, pytest.mark.ssh]

REPO = Path(__file__).resolve().parents[1]
H1, H2, H3 = (host_name(E2E_LAB, n) for n in (1, 2, 3))
SMALL_SHAPES = (
    "LayerNormBackwardOpTest.MetalLayerNormBw_OneTile:LayerNormBackwardOpTest.MetalLayerNormBw_TwoIncompleteTiles:"
    "LayerNormBackwardOpTest.MetalLayerNormBw_OneTilePerRow"
)


def harness(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args], capture_output=True, text=True, timeout=timeout, cwd=REPO
    )


def run_job(lab: SimLab, job: Path, out: Path, *hosts: str) -> dict:
    args = ["run", str(job), "--inventory", str(lab.inventory_path), "--out", str(out), "--quiet"]
    if hosts:
        args += ["--hosts", ",".join(hosts)]
    result = harness(*args)
    assert (out / "summary.json").exists(), result.stdout + result.stderr
    summary = json.loads((out / "summary.json").read_text())
    summary["_stdout"], summary["_rc"] = result.stdout, result.returncode
    return summary


def outcomes(summary: dict, host: str, check: str) -> set[str]:
    return {c["outcome"] for c in cases(summary, host, check)}


CARD_CHECKS = f"""\
    - name: device-smoke
      kind: gtest
      binary: build/test/tt_metal/sim_device_smoke
      timeout: 2m
      env: {{TT_METAL_OPERATION_TIMEOUT_SECONDS: "3"}}
    - name: small-shapes
      kind: gtest
      binary: build/tt-train/tests/ttml_tests
      filter: {SMALL_SHAPES}
      timeout: 2m
      env: {{TT_METAL_OPERATION_TIMEOUT_SECONDS: "3"}}
"""


# ---------------------------------------------------------------------------------------------


def test_nightly_suite_on_the_lab(sim_lab: SimLab, tmp_path: Path):
    """The README's main job: the bug caught on healthy hosts, the broken host and the
    mis-mounted container reported as environment faults, the reordering caught with its pass."""
    sim_lab.fault(H3, "no-hugepages")
    try:
        summary = run_job(sim_lab, REPO / "jobs" / "nightly.yaml", tmp_path / "out")
    finally:
        sim_lab.heal(H3)
    assert summary["_rc"] == 1, summary["_stdout"]  # the order check is a real failure
    for host in (H1, H2):
        assert outcomes(summary, host, "device-smoke") == {"pass"}
        assert outcomes(summary, host, "layernorm-bw-bugrepro") == {"xfail"}  # the known bug, caught
        assert len(cases(summary, host, "layernorm-bw-bugrepro")) == 7
        assert outcomes(summary, host, "layernorm-bw-small-shapes") == {"pass"}
        assert outcomes(summary, host, "layernorm-bw-nightly") <= {"pass", "flaky"}  # masked by mean-zero data
        mis = cases(summary, host, "layernorm-bw-small-shapes-mis-mounted")
        assert {c["outcome"] for c in mis} == {"env_fault"} and {c["category"] for c in mis} == {"mount"}
        assert "/dev/hugepages-1G" in mis[0]["message"]
    # The host without hugepages: every card check an env fault naming the cause, no kernel blamed.
    for case in cases(summary, H3):
        if case["check"] == "eraseinverseops-order":
            continue
        assert (case["outcome"], case["category"]) == ("env_fault", "hugepages"), case
    # The compiler check needs no card: it runs everywhere, the hugepage-less host included.
    for host in (H1, H2, H3):
        (order,) = cases(summary, host, "eraseinverseops-order")
        assert order["outcome"] == "fail"
        assert "ttir-erase-inverse-ops" in order["message"] and "confirmed by A/B" in order["message"]
    table = summary["_stdout"]
    assert "env_fault/hugepages" in table and "known bug" in table and "env_fault/mount" in table


def test_the_fixed_kernel_passes_where_the_bug_fails(sim_lab: SimLab, tmp_path: Path):
    job = write_lab_job(tmp_path, name="e2e", checks="""\
        - name: bugrepro-bug
          kind: gtest
          binary: build/tt-train/tests/ttml_tests
          filter: LayerNormBackwardOpTest.BugRepro_*
          timeout: 5m
        - name: bugrepro-fixed
          kind: gtest
          binary: build/tt-train/tests/ttml_tests_fixed
          filter: LayerNormBackwardOpTest.BugRepro_*
          timeout: 5m
        """)
    summary = run_job(sim_lab, job, tmp_path / "out", H1)
    assert summary["_rc"] == 1
    assert outcomes(summary, H1, "bugrepro-bug") == {"fail"}
    bug = cases(summary, H1, "bugrepro-bug")
    assert len(bug) == 7 and all(c["category"] is None for c in bug)  # real failures, not the environment
    assert outcomes(summary, H1, "bugrepro-fixed") == {"pass"}


@pytest.mark.parametrize("fault", sorted(default_faults()))
def test_each_fault_is_its_own_env_fault_on_its_host(sim_lab: SimLab, tmp_path: Path, fault: str):
    expected = default_faults()[fault].category.value
    sim_lab.fault(H2, fault)
    try:
        summary = run_job(sim_lab, write_lab_job(tmp_path, name="e2e", checks=CARD_CHECKS), tmp_path / "out", H1, H2)
    finally:
        sim_lab.heal(H2)
    assert summary["_rc"] == 3, summary["_stdout"]  # environment faults only: nothing red
    broken = cases(summary, H2)
    faults = {(c["outcome"], c["category"]) for c in broken} - {("pass", None)}
    assert faults == {("env_fault", expected)}, broken
    if fault != "hang":  # a hang is cured by the triage's reset: later checks may pass there
        assert {c["outcome"] for c in broken} == {"env_fault"}, broken
    assert {c["outcome"] for c in cases(summary, H1)} == {"pass"}


def test_a_cardless_check_still_runs_on_a_host_with_a_card_fault(sim_lab: SimLab, tmp_path: Path):
    job = write_lab_job(tmp_path, name="e2e", checks=CARD_CHECKS + """\
    - name: order
      kind: mlir-order
      profile: none
      input: {input}
      input_anywhere: true
      command: [ttmlir-opt, --ttir-to-ttnn-runtime-pipeline, "{{input}}", -o, "{{output}}"]
      timeout: 2m
""".format(input=REPO / "jobs" / "inputs" / "resnet50_layer4_indexed.mlir"))
    sim_lab.fault(H1, "no-driver")
    try:
        summary = run_job(sim_lab, job, tmp_path / "out", H1)
    finally:
        sim_lab.heal(H1)
    assert outcomes(summary, H1, "device-smoke") == {"env_fault"}
    assert outcomes(summary, H1, "order") == {"fail"}  # it ran: the stand-in compiler reorders


def test_up_again_changes_nothing_and_down_leaves_nothing(tmp_path: Path):
    lab = SimLab(f"{E2E_LAB}-updown", directory=tmp_path / "lab")
    lab.down()
    try:
        first = lab.up(1)
        ids = {c.id for c in lab._containers()}
        inventory = lab.inventory_path.read_text()
        second = lab.up(1)
        assert {c.id for c in lab._containers()} == ids
        assert lab.inventory_path.read_text() == inventory
        assert [h.address for h in second.hosts] == [h.address for h in first.hosts]
    finally:
        lab.down()
    import docker

    client = docker.from_env()
    label = {"label": f"{LAB_LABEL}={E2E_LAB}-updown"}
    assert client.containers.list(all=True, filters=label) == []
    assert client.volumes.list(filters=label) == []
    assert client.networks.list(filters=label) == []


def test_ssh_going_down_mid_run_is_an_ssh_fault_not_a_failure(sim_lab: SimLab, tmp_path: Path):
    job = write_lab_job(tmp_path, name="e2e", checks="""\
        - name: long
          kind: command
          command: [sleep, "60"]
          timeout: 2m
        """)
    out = tmp_path / "out"
    run = subprocess.Popen(
        [sys.executable, "-m", "harness", "run", str(job), "--inventory", str(sim_lab.inventory_path),
         "--out", str(out), "--quiet", "--hosts", H1],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not any(h.running for h in sim_lab.status().hosts if h.name == H1):
            assert run.poll() is None and time.monotonic() < deadline, "the check never started"
            time.sleep(0.5)
        sim_lab.fault(H1, "ssh-down")
        stdout, stderr = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
        sim_lab.heal(H1)
    assert run.returncode == 3, stdout + stderr
    summary = json.loads((out / "summary.json").read_text())
    (case,) = cases(summary, H1, "long")
    assert (case["outcome"], case["category"]) == ("env_fault", "ssh")
