"""Slurm as data (harness/core/slurm.py) and the inventory's `slurm:` clusters: no cluster needed.

The texts are Slurm 22.05's own, as the simulated lab's slurmctld printed them.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from harness.core import slurm
from harness.core.errors import InputError
from harness.core.inventory import load_inventory
from harness.core.outcomes import Attempt, CaseResult, EnvCategory, KnownBug, Outcome, Verdict
from harness.orchestration.slurmrun import EPILOG_WAIT, drained_verdict, settles

SHOW_ARRAY = """\
JobId=1 ArrayJobId=1 ArrayTaskId=3 JobName=wrap
   UserId=ci(1000) GroupId=ci(1000) MCS_label=N/A
   JobState=RUNNING Reason=None Dependency=(null)
   NodeList=sim-wh-01
   JOB_GRES=tenstorrent:n150:1
     Nodes=sim-wh-01 CPU_IDs=0 Mem=0 GRES=tenstorrent:n150:1(IDX:1)
   TresPerNode=gres:tenstorrent:n150:1

JobId=2 ArrayJobId=1 ArrayTaskId=1 JobName=wrap
   JobState=RUNNING Reason=None Dependency=(null)
   JOB_GRES=tenstorrent:n150:1
     Nodes=sim-wh-01 CPU_IDs=1 Mem=0 GRES=tenstorrent:n150:1(IDX:0)
   TresPerNode=gres:tenstorrent:n150:1
"""

SHOW_JOB_EXIT_3 = """\
JobId=1 JobName=wrap
   UserId=ci(1000) GroupId=ci(1000) MCS_label=N/A
   Priority=4294901759 Nice=0 Account=(null) QOS=(null)
   JobState=FAILED Reason=NonZeroExitCode Dependency=(null)
   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=3:0
   RunTime=00:00:00 TimeLimit=UNLIMITED TimeMin=N/A
   NodeList=sim-wh-01
   BatchHost=sim-wh-01
"""

SHOW_NODE_DRAINED = """\
NodeName=sim-wh-03 Arch=x86_64 CoresPerSocket=1
   CPUAlloc=0 CPUEfctv=4 CPUTot=4 CPULoad=0.50
   AvailableFeatures=wormhole_b0,n150,nightly,compiler,sim
   Gres=tenstorrent:n150:1
   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=wh-n150
   Reason=[tt-harness] preflight failed: hugepages: no hugetlbfs mounted at /dev/hugepages-1G [root@2026-11-24T08:26:01]
"""


def test_config_lines_list_only_present_device_files():
    nodes = [
        slurm.NodeLines("h1", {"n150": (0, 1)}, ("wormhole_b0", "n150", "ci lab")),
        slurm.NodeLines("h2", {"n150": (1,)}, ("n150",), missing=(0,)),
        slurm.NodeLines("h3", {"n300": ()}, ("n300",), missing=(0, 1)),
    ]
    conf, gres = slurm.config_lines(nodes, {"n150": "wh-n150"}, healthcheck="/hc", epilog="/ep", health_interval=30)
    assert "GresTypes=tenstorrent" in conf and "HealthCheckProgram=/hc" in conf and "Epilog=/ep" in conf
    assert "NodeName=h1 CPUs=6 Gres=tenstorrent:n150:2 Features=wormhole_b0,n150,ci_lab State=UNKNOWN" in conf
    h3 = next(line for line in conf if line.startswith("NodeName=h3"))
    assert "Gres=" not in h3  # no card left: no GRES, and no File for slurmd to die on
    assert gres == [
        "NodeName=h1 Name=tenstorrent Type=n150 File=/dev/tenstorrent/0",
        "NodeName=h1 Name=tenstorrent Type=n150 File=/dev/tenstorrent/1",
        "NodeName=h2 Name=tenstorrent Type=n150 File=/dev/tenstorrent/1",
    ]
    assert "# h2: /dev/tenstorrent/0 missing: not listed" in conf
    assert "PartitionName=wh-n150 Nodes=h1,h2 Default=YES MaxTime=INFINITE State=UP" in conf
    assert "PartitionName=wh-n300 Nodes=h3 MaxTime=INFINITE State=UP" in conf


def test_allocated_devices_reads_only_this_jobs_record():
    assert slurm.allocated_devices(SHOW_ARRAY, "sim-wh-01", "2") == (0,)
    assert slurm.allocated_devices(SHOW_ARRAY, "sim-wh-01", "1") == (1,)
    assert slurm.allocated_devices(SHOW_ARRAY, "sim-wh-02", "1") == ()
    assert slurm.allocated_devices("     Nodes=a CPU_IDs=0-1 Mem=0 GRES=tenstorrent:n150:3(IDX:0-1,3)\n") == (0, 1, 3)
    assert slurm.allocated_devices("     Nodes=a CPU_IDs=0 Mem=0 GRES=\n") == ()


def test_node_state_and_who_drained_it():
    flags, reason = slurm.node_state(SHOW_NODE_DRAINED)
    assert flags == {"IDLE", "DRAIN"}
    assert reason == "[tt-harness] preflight failed: hugepages: no hugetlbfs mounted at /dev/hugepages-1G"
    assert slurm.drained_by_us(flags, reason)
    assert not slurm.drained_by_us({"IDLE", "DRAIN"}, "admin: replacing the fan")
    assert not slurm.drained_by_us({"IDLE"}, "")
    assert slurm.node_state("NodeName=x State=IDLE Reason=(null)\n")[1] == ""


def test_job_exit_status_is_the_scripts_own():
    assert slurm.job_exit_status(SHOW_JOB_EXIT_3) == 3
    assert slurm.job_exit_status(SHOW_JOB_EXIT_3.replace("ExitCode=3:0", "ExitCode=0:0")) == 0
    assert slurm.job_exit_status(SHOW_JOB_EXIT_3.replace("ExitCode=3:0", "ExitCode=0:9")) is None  # killed by a signal
    assert slurm.job_exit_status("slurm_load_jobs error: Invalid job id specified") is None


def test_a_result_that_found_its_node_at_fault_waits_for_the_epilog_within_bounds():
    at_fault, healthy = {"node": "h1", "node_fault": "[tt-harness] preflight failed: hugepages: gone"}, {"node": "h1", "node_fault": None}
    completing, failed = slurm.JobState(7, "COMPLETING"), slurm.JobState(7, "FAILED")
    assert settles(healthy, completing, 0)
    assert not settles(at_fault, completing, 0)  # the epilog is draining the node
    assert settles(at_fault, failed, 0) and settles(at_fault, None, 0)  # ended, or gone from squeue
    assert settles(at_fault, completing, EPILOG_WAIT + 1)  # a hung epilog does not hang the run


def test_drain_reason_is_prefixed_and_bounded():
    reason = slurm.drain_reason(["hugepages: gone", "firmware: 18.2.0"])
    assert reason == "[tt-harness] preflight failed: hugepages: gone; firmware: 18.2.0"
    assert len(slurm.drain_reason(["x" * 1000])) == slurm.MAX_REASON


def test_hostlists_and_gres_conf():
    assert slurm.expand_hostlist("sim-wh-[01-03,05],ctl") == ["sim-wh-01", "sim-wh-02", "sim-wh-03", "sim-wh-05", "ctl"]
    gres = textwrap.dedent("""\
        # comment
        NodeName=sim-wh-[01-02] Name=tenstorrent Type=n150 File=/dev/tenstorrent/[0-1]
        NodeName=sim-wh-03 Name=tenstorrent Type=n300 File=/dev/tenstorrent/2
        Name=gpu File=/dev/nvidia0
        """)
    assert slurm.gres_devices(gres, "sim-wh-02") == (("n150", 0), ("n150", 1))
    assert slurm.gres_devices(gres, "sim-wh-03") == (("n300", 2),)
    assert slurm.gres_devices(gres, "other") == ()


def test_squeue_json_and_slurm_verdicts():
    text = json.dumps({"jobs": [
        {"job_id": 7, "job_state": "TIMEOUT", "state_reason": "TimeLimit", "nodes": "sim-wh-02", "exit_code": 0},
        {"job_id": 8, "job_state": ["NODE_FAIL"], "state_reason": "None", "nodes": "sim-wh-01"},
        {"job_id": "junk"},
    ]})
    jobs = slurm.parse_squeue_json(text)
    assert set(jobs) == {7, 8} and jobs[7].finished and jobs[8].state == "NODE_FAIL"
    timeout = slurm.slurm_verdict(jobs[7])
    assert (timeout.outcome, timeout.category) == (Outcome.ENV_FAULT, EnvCategory.TIMEOUT)
    assert "TIMEOUT (TimeLimit) on sim-wh-02" in timeout.message and "--time" in timeout.message
    node_fail = slurm.slurm_verdict(jobs[8])
    assert node_fail.category is EnvCategory.SCHEDULER and "NODE_FAIL" in node_fail.message
    with pytest.raises(ValueError):
        slurm.parse_squeue_json("squeue: error: Unable to contact slurm controller")


def test_time_limit_covers_timeout_and_margin():
    assert slurm.time_limit(120) == 4
    assert slurm.time_limit(1) == 3
    assert slurm.time_limit(3600, attempts=2) == 122


def test_case_json_round_trip_and_combining_array_elements():
    bug = KnownBug("sum overwritten", "https://example.org/bug")
    failed = Verdict(Outcome.FAIL, message="max_diff 1000")
    passed = Verdict(Outcome.PASS)
    one = CaseResult("T", "job.check.S", failed, (Attempt(failed, 1.5, "out"),), 1.5, "out", bug, "check")
    back = slurm.case_from_json(json.loads(json.dumps(slurm.case_to_json(one))))
    assert back == one
    fault = Verdict.env_fault(EnvCategory.HUGEPAGES, "gone")
    assert slurm.verdict_from_json(slurm.verdict_to_json(fault)) == fault
    # Three elements of an array, one attempt each: combined as `repeat: 3` is.
    runs = [[CaseResult("T", "c", v, (Attempt(v, 1.0),))] for v in (passed, failed, passed)]
    (combined,) = slurm.combine_cases("check", None, runs)
    assert combined.outcome is Outcome.FLAKY and len(combined.attempts) == 3 and combined.duration == 3.0
    (expected,) = slurm.combine_cases("check", bug, [[CaseResult("T", "c", failed, (Attempt(failed),))]])
    assert expected.outcome is Outcome.XFAIL


def test_drained_node_verdict_takes_the_failed_checks_category():
    verdict = drained_verdict("h3", "drained: [tt-harness] preflight failed: hugepages: no hugetlbfs")
    assert (verdict.category, "h3" in verdict.message) == (EnvCategory.HUGEPAGES, True)
    assert drained_verdict("h3", "drained: admin: new fan").category is EnvCategory.SCHEDULER


INVENTORY = """\
hosts:
  - {name: h1, address: 10.0.0.1, boards: [{type: n150, devices: [0]}]}
slurm:
  - name: lab
    login: {name: login, address: 10.0.0.9, user: ci}
    shared_dir: /shared/tt-harness
    partitions: {n150: wh-n150}
    nodes: [h1]
"""


def test_inventory_names_clusters(tmp_path: Path):
    path = tmp_path / "inv.yaml"
    path.write_text(INVENTORY)
    inv = load_inventory(path)
    cluster = inv.cluster("lab")
    assert (cluster.login.address, cluster.shared_dir, cluster.partition("n150"), cluster.nodes) == (
        "10.0.0.9", "/shared/tt-harness", "wh-n150", ("h1",))
    assert cluster.node_command == ("tt-harness-node",)


@pytest.mark.parametrize("change, message", [
    (("nodes: [h1]", "nodes: [h9]"), "node 'h9' is not a host of this inventory"),
    (("shared_dir: /shared/tt-harness", "shared_dir: shared"), "must be an absolute path"),
    (("login: {name: login, address: 10.0.0.9, user: ci}", "login: {name: login, transport: local}"), "reached over SSH"),
    (("    nodes: [h1]\n", "    nodes: [h1]\n    queue: fast\n"), "queue"),
])
def test_inventory_cluster_mistakes_are_input_errors(tmp_path: Path, change, message):
    path = tmp_path / "inv.yaml"
    path.write_text(INVENTORY.replace(*change))
    with pytest.raises(InputError) as caught:
        load_inventory(path)
    text = str(caught.value)
    assert message in text and str(path) in text


def _cli(*args: str):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[1])


def test_run_with_an_unknown_cluster_is_a_usage_error(tmp_path: Path):
    from tests.jobspec import write_job

    inv = tmp_path / "inv.yaml"
    inv.write_text(INVENTORY)
    job = write_job(tmp_path, "{base: 'ubuntu:22.04', wheel: 0.81.1}")
    result = _cli("run", str(job), "--inventory", str(inv), "--slurm", "nope", "--out", str(tmp_path / "out"))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "no slurm cluster named 'nope' (clusters: lab)" in result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_slurm_config_from_the_inventory_alone(tmp_path: Path):
    inv = tmp_path / "inv.yaml"
    inv.write_text(INVENTORY)
    result = _cli("slurm", "config", "--inventory", str(inv), "--cluster", "lab", "--no-probe", "--health-interval", "30")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "NodeName=h1 CPUs=4 Gres=tenstorrent:n150:1 Features=wormhole_b0,n150 State=UNKNOWN" in lines
    assert "NodeName=h1 Name=tenstorrent Type=n150 File=/dev/tenstorrent/0" in lines
    assert "HealthCheckInterval=30" in lines and "PartitionName=wh-n150 Nodes=h1 Default=YES MaxTime=INFINITE State=UP" in lines
    bad = _cli("slurm", "config", "--inventory", str(inv), "--cluster", "other", "--no-probe")
    assert bad.returncode == 2 and "no slurm cluster named 'other'" in bad.stderr


def test_the_example_slurm_inventory_loads():
    inv = load_inventory(Path(__file__).resolve().parents[1] / "configs" / "examples" / "slurm-lab.yaml")
    cluster = inv.cluster("wh-lab")
    assert cluster.partition("n300") == "wh-n300" and cluster.node_command == ("/usr/local/bin/tt-harness-node",)
