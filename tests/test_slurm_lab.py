"""Through Slurm on the simulated lab: real slurmctld/slurmd/munged (Debian 12's), STAND-IN cards.

`harness run --slurm` in a subprocess against a lab brought up with `--slurm` (three hosts and
the controller `<lab>-ctl`, which is the login node). What is asserted is seen from the hosts'
side (their Docker engines) and from Slurm's (`sinfo`), never from the harness's own report
alone. FAILS, never skips, when Docker cannot run the lab.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Callable, Iterator

import pytest

from harness.lab import slurmlab
from harness.lab.sim import LabError, SimLab, host_name
from tests.jobspec import write_lab_job
from tests.labfixtures import E2E_LAB, cases

pytestmark = [pytest.mark.docker, pytest.mark.ssh]

REPO = Path(__file__).resolve().parents[1]
LAB = f"{E2E_LAB}-s"  # its own lab: the SSH-only e2e lab of other tests is left alone
H1, H2, H3 = (host_name(LAB, n) for n in (1, 2, 3))


@pytest.fixture(scope="module")
def slurm_lab(tmp_path_factory) -> Iterator[SimLab]:
    lab = SimLab(LAB, directory=tmp_path_factory.mktemp("slurmlab"))
    try:
        lab.down()
        lab.up(3, slurm=True)
    except LabError as exc:
        pytest.fail(f"the simulated lab with Slurm did not come up: {exc}", pytrace=False)
    wait_for(lambda: all(state == "idle" for state, _ in nodes(lab).values()) and len(nodes(lab)) == 3, 90,
             lambda: f"Slurm nodes not idle: {nodes(lab)}")
    yield lab
    lab.down()


def wait_for(predicate: Callable[[], bool], timeout: float, describe: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    pytest.fail(f"not within {timeout:.0f} s: {describe()}", pytrace=False)


def nodes(lab: SimLab) -> dict[str, tuple[str, str]]:
    """Node -> (state, reason) as `sinfo` on the controller says."""
    status = slurmlab.cluster_status(lab) or {"nodes": []}
    return {n["name"]: (n["state"], n["reason"]) for n in status["nodes"]}


def ctl(lab: SimLab, *argv: str) -> str:
    result = lab._container(slurmlab.controller_name(lab)).exec_run(list(argv))
    assert result.exit_code == 0, result.output.decode(errors="replace")
    return result.output.decode(errors="replace")


def containers(lab: SimLab, host: str) -> list[list[str]]:
    """The running containers on ``host``'s engine, each as the device files it was given."""
    # A container that ends between `ps` and `inspect` is left out, not shown with no card.
    script = 'for c in $(docker ps -q); do d=$(docker inspect -f "{{range .HostConfig.Devices}}{{.PathOnHost}} {{end}}" "$c" 2>/dev/null) && echo "$d."; done'
    result = lab._container(host).exec_run(["sh", "-c", script])
    return [line.rstrip(".").split() for line in result.output.decode(errors="replace").splitlines() if line.endswith(".")]


def command_checks(prefix: str, count: int, command: str, timeout: str) -> str:
    """``count`` checks of kind command, as the YAML of a job's checks list."""
    return "".join(f"- name: {prefix}-{n}\n  kind: command\n  command: {command}\n  timeout: {timeout}\n" for n in range(1, count + 1))


def harness_run(lab: SimLab, job: Path, out: Path, *extra: str, slurm: bool = True) -> subprocess.Popen:
    args = [sys.executable, "-m", "harness", "run", str(job), "--inventory", str(lab.inventory_path), "--out", str(out), "--quiet", *extra]
    if slurm:
        args += ["--slurm", LAB]
    return subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(process: subprocess.Popen, out: Path, timeout: float = 900) -> dict:
    output, _ = process.communicate(timeout=timeout)
    assert (out / "summary.json").exists(), output
    summary = json.loads((out / "summary.json").read_text())
    summary["_rc"], summary["_stdout"] = process.returncode, output
    return summary


def all_cases(summary: dict) -> list[dict]:
    return [dict(c, host=s["host"]) for s in summary["hosts"] for c in s["cases"]]


def junit_cases(path: Path) -> list[tuple]:
    """Every testcase of a JUnit file: class, name and what it says (pass, failure/error type)."""
    out = []
    for case in ET.parse(path).getroot().iter("testcase"):
        verdict = "pass"
        for tag in ("failure", "error", "skipped"):
            element = case.find(tag)
            if element is not None:
                verdict = f"{tag}:{element.get('type')}"
        out.append((case.get("classname"), case.get("name"), verdict))
    return sorted(out)


# ---------------------------------------------------------------------------------------------


def test_layernorm_bug_is_the_same_real_failure_through_slurm_as_through_ssh(slurm_lab: SimLab, tmp_path: Path):
    """The accumulation bug, not declared as known: a real failure case by case, both ways."""
    job = write_lab_job(tmp_path, name="slurm-e2e-bug", checks="""\
        - name: layernorm-bw-bugrepro
          kind: gtest
          binary: build/tt-train/tests/ttml_tests
          filter: LayerNormBackwardOpTest.BugRepro_*
          timeout: 5m
          env: {TT_METAL_OPERATION_TIMEOUT_SECONDS: "20"}
        """, fanout="all")
    ssh = finish(harness_run(slurm_lab, job, tmp_path / "ssh", "--hosts", H1, slurm=False), tmp_path / "ssh")
    via = finish(harness_run(slurm_lab, job, tmp_path / "slurm", "--hosts", H1), tmp_path / "slurm")
    assert ssh["_rc"] == via["_rc"] == 1, via["_stdout"]
    bug = [c for c in cases(via, H1)]
    assert len(bug) == 7 and {c["outcome"] for c in bug} == {"fail"}, via["_stdout"]
    assert junit_cases(tmp_path / "ssh" / "junit.xml") == junit_cases(tmp_path / "slurm" / "junit.xml")
    # The attempt's logs land where the SSH path keeps them.
    for way in ("ssh", "slurm"):
        folder = next((tmp_path / way).glob(f"*/{H1}/layernorm-bw-bugrepro/attempt-1"))
        assert {"stdout.log", "stderr.log", "gtest.xml"} <= {p.name for p in folder.iterdir()}, way
    assert {(c["name"], c["outcome"], c["message"]) for c in cases(ssh, H1)} == {
        (c["name"], c["outcome"], c["message"]) for c in bug}


def test_repeats_are_one_job_array_combined_as_repeats_are(slurm_lab: SimLab, tmp_path: Path):
    job = write_lab_job(tmp_path, fanout="any", name="slurm-e2e-array", checks="""\
        - name: thrice
          kind: command
          command: ['true']
          repeat: 3
          timeout: 1m
        """)
    summary = finish(harness_run(slurm_lab, job, tmp_path / "out"), tmp_path / "out")
    (case,) = all_cases(summary)
    assert (summary["_rc"], case["outcome"], case["attempts"]) == (0, "pass", 3), summary["_stdout"]
    arrays = ctl(slurm_lab, "squeue", "-h", "-t", "all", "-n", "tt-harness:slurm-e2e-array:thrice", "-o", "%F %K")
    assert sorted(line.split()[1] for line in arrays.splitlines()) == ["1", "2", "3"], arrays


def test_two_orchestrators_never_share_a_card(slurm_lab: SimLab, tmp_path: Path):
    """Two `harness run --slurm` at once, eight checks on three cards: from every host's
    engine, no device file is ever given to two running containers, and each container sees
    exactly one card."""
    body = command_checks("hold", 4, """[sh, -c, 'test "$(ls /dev/tenstorrent | wc -l)" = 1 && sleep 4']""", "2m")
    job = write_lab_job(tmp_path, fanout="any", name="slurm-e2e-hold", checks=body)
    seen: list[tuple[str, list[list[str]]]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            for host in (H1, H2, H3):
                seen.append((host, containers(slurm_lab, host)))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        runs = [harness_run(slurm_lab, job, tmp_path / f"o{n}") for n in (1, 2)]
        summaries = [finish(p, tmp_path / f"o{n}") for n, p in zip((1, 2), runs)]
    finally:
        stop.set()
        sampler.join()
    for summary in summaries:
        assert summary["_rc"] == 0, summary["_stdout"]
        assert sorted(c["outcome"] for c in all_cases(summary)) == ["pass"] * 4
    busy = [(host, running) for host, running in seen if running]
    assert busy, "the sampler never saw a check's container"
    for host, running in busy:
        devices = [d for c in running for d in c]
        assert len(devices) == len(set(devices)), f"{host}: one card in two containers at once: {running}"
        assert all(len(c) == 1 for c in running), f"{host}: a container with other than one card: {running}"
    assert len({host for host, _ in busy}) >= 2, "Slurm never spread the checks over the hosts"


def test_cancelling_a_run_leaves_no_container_anywhere(slurm_lab: SimLab, tmp_path: Path):
    job = write_lab_job(tmp_path, fanout="any", name="slurm-e2e-long", checks="""\
        - name: long
          kind: command
          command: [sleep, "300"]
          timeout: 10m
        """)
    out = tmp_path / "out"
    process = harness_run(slurm_lab, job, out)
    wait_for(lambda: any(containers(slurm_lab, h) for h in (H1, H2, H3)), 300, lambda: "no container started")
    process.send_signal(signal.SIGINT)
    summary = finish(process, out, timeout=180)
    assert summary["_rc"] == 130, summary["_stdout"]
    assert [c["outcome"] for c in all_cases(summary)] == ["skip"]
    wait_for(lambda: not any(containers(slurm_lab, h) for h in (H1, H2, H3)), 60,
             lambda: f"containers left: {[(h, containers(slurm_lab, h)) for h in (H1, H2, H3)]}")
    assert "slurm-e2e-long" not in ctl(slurm_lab, "squeue", "-h", "-o", "%j %T")


def test_a_job_slurm_ends_without_a_result_is_an_env_fault_with_slurms_reason(slurm_lab: SimLab, tmp_path: Path):
    """Cancelled from outside the run (an admin's scancel): not the code's failure, and Slurm's
    own state is the message; the epilog still removes the container."""
    job = write_lab_job(tmp_path, name="slurm-e2e-killed", checks="""\
        - name: killed
          kind: command
          command: [sleep, "300"]
          timeout: 10m
        """, fanout="all")
    out = tmp_path / "out"
    process = harness_run(slurm_lab, job, out, "--hosts", H2)
    wait_for(lambda: bool(containers(slurm_lab, H2)), 300, lambda: "no container started")
    ctl(slurm_lab, "scancel", "--name=tt-harness:slurm-e2e-killed:killed")
    summary = finish(process, out, timeout=180)
    (case,) = cases(summary, H2)
    assert (summary["_rc"], case["outcome"], case["category"]) == (3, "env_fault", "scheduler"), summary["_stdout"]
    assert "ended CANCELLED" in case["message"] and H2 in case["message"]
    wait_for(lambda: not containers(slurm_lab, H2), 60, lambda: f"containers left on {H2}: {containers(slurm_lab, H2)}")


def test_a_sick_node_is_drained_its_work_runs_elsewhere_and_heal_resumes_it(slurm_lab: SimLab, tmp_path: Path):
    ctl(slurm_lab, "scontrol", "update", f"nodename={H2}", "state=drain", "reason=admin: replacing a fan")
    slurm_lab.fault(H3, "no-hugepages")
    try:
        wait_for(lambda: nodes(slurm_lab)[H3][1].startswith("[tt-harness]"), 60, lambda: f"{H3} not drained: {nodes(slurm_lab)}")
        state, reason = nodes(slurm_lab)[H3]
        assert state == "drained" and "hugepages" in reason
        job = write_lab_job(tmp_path, fanout="any", name="slurm-e2e-pool", checks=command_checks("pooled", 3, "['true']", "1m"))
        summary = finish(harness_run(slurm_lab, job, tmp_path / "pool"), tmp_path / "pool")
        assert summary["_rc"] == 0, summary["_stdout"]
        ran = all_cases(summary)
        assert sorted(c["outcome"] for c in ran) == ["pass"] * 3
        assert {c["host"] for c in ran} == {H1}, "work went to a drained node"
        # The health check caught the fault before anything ran there: Slurm's reason is the report's.
        pinned = write_lab_job(tmp_path, name="slurm-e2e-pinned", checks="""\
            - name: pinned
              kind: command
              command: ['true']
              timeout: 1m
            """, fanout="all")
        summary = finish(harness_run(slurm_lab, pinned, tmp_path / "pinned", "--hosts", H3), tmp_path / "pinned")
        (case,) = cases(summary, H3)
        assert (summary["_rc"], case["outcome"], case["category"]) == (3, "env_fault", "hugepages"), summary["_stdout"]
        assert "[tt-harness]" in case["message"]
        slurm_lab.heal(H3)
        wait_for(lambda: nodes(slurm_lab)[H3][0] == "idle", 60, lambda: f"{H3} not resumed: {nodes(slurm_lab)}")
        # A node someone else drained stays drained, however healthy it is.
        time.sleep(slurmlab.HEALTH_INTERVAL + 2)
        assert nodes(slurm_lab)[H2] == ("drained", "admin: replacing a fan")
    finally:
        slurm_lab.heal(H3)
        ctl(slurm_lab, "scontrol", "update", f"nodename={H2}", "state=resume")


def test_a_fault_between_health_checks_is_still_an_env_fault_and_drains(slurm_lab: SimLab, tmp_path: Path):
    """A host breaks and a check is sent there at once: whichever sees it first (the job's own
    preflight, or the health check), the check is env_fault/hugepages and the node is drained
    with the harness's reason."""
    slurm_lab.fault(H1, "no-hugepages")
    try:
        job = write_lab_job(tmp_path, name="slurm-e2e-race", checks="""\
            - name: raced
              kind: command
              command: ['true']
              timeout: 1m
            """, fanout="all")
        summary = finish(harness_run(slurm_lab, job, tmp_path / "race", "--hosts", H1), tmp_path / "race")
        (case,) = cases(summary, H1)
        assert (case["outcome"], case["category"]) == ("env_fault", "hugepages"), summary["_stdout"]
        # Drained by the time the run reports: by the job's epilog (its exit status says its
        # preflight failed; the run waits for the epilog) or, before the job ran, by the health check.
        notes = next(s for s in summary["hosts"] if s["host"] == H1).get("notes", [])
        assert any("epilog ran the health check, Slurm has the node drain" in n for n in notes) or "[tt-harness]" in case["message"], summary["hosts"]
        state, reason = nodes(slurm_lab)[H1]
        assert "drain" in state and reason.startswith("[tt-harness]")
    finally:
        slurm_lab.heal(H1)
        wait_for(lambda: nodes(slurm_lab)[H1][0] == "idle", 60, lambda: f"{H1} not resumed: {nodes(slurm_lab)}")


def test_the_epilog_of_a_job_whose_preflight_failed_runs_the_health_check(slurm_lab: SimLab):
    """A job runs as its user, who may not drain a node: the node entry point exits 3 when its
    preflight finds the node at fault, and the epilog (root, run by slurmd with SLURM_JOB_ID)
    runs the health check for that job, and only for that one."""
    def finished_job(status: int) -> str:
        job_id = ctl(slurm_lab, "sbatch", "--parsable", "-w", H1, "--gres=tenstorrent:n150:1", "--chdir=/tmp",
                     "-o", "/dev/null", f"--wrap=exit {status}").strip()
        wait_for(lambda: f"ExitCode={status}:0" in ctl(slurm_lab, "scontrol", "show", "job", job_id), 60,
                 lambda: ctl(slurm_lab, "scontrol", "show", "job", job_id))
        return job_id

    healthy, at_fault = finished_job(0), finished_job(3)
    slurm_lab.fault(H1, "no-hugepages")
    try:
        def epilog(job_id: str) -> str:
            result = slurm_lab._container(H1).exec_run([slurmlab.EPILOG], environment={"SLURM_JOB_ID": job_id})
            assert result.exit_code == 0, result.output
            return result.output.decode(errors="replace")

        assert "health check" not in epilog(healthy)
        assert f"job {at_fault} found this node at fault: health check" in epilog(at_fault)
        state, reason = nodes(slurm_lab)[H1]  # drained by it, or by the periodic check just before
        assert "drain" in state and reason.startswith("[tt-harness]") and "hugepages" in reason
    finally:
        slurm_lab.heal(H1)
        wait_for(lambda: nodes(slurm_lab)[H1][0] == "idle", 60, lambda: f"{H1} not resumed: {nodes(slurm_lab)}")


def test_slurm_config_never_lists_a_missing_device_file(slurm_lab: SimLab):
    slurm_lab.fault(H2, "no-device")
    try:
        result = subprocess.run(
            [sys.executable, "-m", "harness", "slurm", "config", "--inventory", str(slurm_lab.inventory_path), "--cluster", LAB],
            cwd=REPO, capture_output=True, text=True, timeout=120,
        )
    finally:
        slurm_lab.heal(H2)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert f"NodeName={H1} Name=tenstorrent Type=n150 File=/dev/tenstorrent/0" in lines
    assert not any(line.startswith(f"NodeName={H2} Name=tenstorrent") for line in lines)
    assert f"# {H2}: /dev/tenstorrent/0 missing: not listed" in lines
