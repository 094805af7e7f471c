"""The docker run argv and the in-container probe, exercised for real under sh."""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness.core.container_exit import judge_exit
from harness.core.invocation import PROBE_EXIT, docker_run_argv
from harness.core.invocation import ProbeItem, missing_from_probe, probe_items, container_command
from harness.core.outcomes import EnvCategory, HarnessErrorKind, Outcome
from harness.core.spec import load_job

REPO = Path(__file__).resolve().parents[1]


def _argv(job_name: str, check_name: str, **kw) -> list[str]:
    job = load_job(REPO / "jobs" / f"{job_name}.yaml")
    return docker_run_argv(
        job, job.check(check_name), "tt-harness/x:1", run_id="r1", attempt=2, host_workdir="/tmp/w", **kw
    )


def test_layernorm_gtest_argv_has_profile_labels_probe_and_filter():
    argv = _argv("layernorm-bw", "layernorm-bw-bugrepro", device_ids=[0])
    assert argv[:5] == ["docker", "run", "--rm", "--name", "harness-r1-layernorm-bw-bugrepro-2"]
    assert argv[argv.index("-v") : argv.index("-v") + 2] == ["-v", "/tmp/w:/harness"]
    for option in (["--device", "/dev/tenstorrent"], ["-v", "/dev:/dev"], ["-v", "/sys:/sys"], ["-w", "/tt-metal"]):
        assert any(argv[i : i + 2] == option for i in range(len(argv))), option
    assert "harness.check=layernorm-bw-bugrepro" in argv
    dash = argv.index("--")
    assert argv[dash - 4 : dash] == [
        "device:/dev/tenstorrent/0", "sysfs:/sys/class/tenstorrent", "hugetlbfs:/dev/hugepages-1G", "writable:/dev/shm",
    ]
    assert argv[dash + 1 :] == [
        "build/tt-train/tests/ttml_tests",
        "--gtest_filter=LayerNormBackwardOpTest.BugRepro_*",
        "--gtest_output=xml:/harness/out/gtest.xml",
    ]


def test_iommu_host_needs_no_hugepages_in_the_container():
    assert ProbeItem("hugetlbfs", "/dev/hugepages-1G") not in probe_items([0, 1], iommu=True)
    assert [i.path for i in probe_items([0, 1])][:2] == ["/dev/tenstorrent/0", "/dev/tenstorrent/1"]


def test_mlir_order_command_gets_debuginfo_dump_and_placeholders_filled():
    job = load_job(REPO / "jobs" / "eraseinverseops-order.yaml")
    check = job.check("resnet50-layer4-op-order")
    assert container_command(check, job.image) == [
        "ttmlir-opt", "--ttir-to-ttnn-runtime-pipeline", "/harness/in/resnet50_layer4_indexed.mlir",
        "-o", "/harness/out/out.mlir", "--mlir-print-debuginfo", "--mlir-print-ir-after-all",
    ]
    argv = _argv("eraseinverseops-order", "resnet50-layer4-op-order")
    assert "--device" not in argv and "device:/dev/tenstorrent/0" not in argv  # compiler-only job


def _run_probe(items: list[str], command: list[str]) -> subprocess.CompletedProcess:
    argv = _argv("layernorm-bw", "layernorm-bw-bugrepro", device_ids=[0])
    script = argv[argv.index("-c") + 1]
    return subprocess.run(["sh", "-c", script, "harness-probe", *items, "--", *command], capture_output=True, text=True)


def test_probe_passes_and_execs_the_command_with_its_arguments_verbatim(tmp_path):
    hostile = "$(touch " + str(tmp_path / "pwned") + "); echo `id`"
    done = _run_probe(["device:/dev/null", "sysfs:/proc", "writable:/tmp"], ["printf", "%s|", "a b", hostile])
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"a b|{hostile}|"
    assert not (tmp_path / "pwned").exists()
    assert done.stderr.splitlines() == [
        "harness-probe: ok device /dev/null", "harness-probe: ok sysfs /proc", "harness-probe: ok writable /tmp",
    ]


def test_probe_names_what_is_missing_and_does_not_start_the_test(tmp_path):
    marker = tmp_path / "ran"
    done = _run_probe(
        ["device:/dev/tenstorrent/0", "hugetlbfs:/dev/hugepages-1G", "writable:/tmp"], ["touch", str(marker)]
    )
    assert done.returncode == PROBE_EXIT and not marker.exists()
    lines = done.stderr.splitlines()
    assert missing_from_probe(lines) == [
        ProbeItem("device", "/dev/tenstorrent/0"), ProbeItem("hugetlbfs", "/dev/hugepages-1G"),
    ]
    verdict = judge_exit(done.returncode, False, list(enumerate(lines, 1)), 60)
    assert verdict.outcome is Outcome.ENV_FAULT and verdict.category is EnvCategory.MOUNT
    assert "/dev/tenstorrent/0 (device), /dev/hugepages-1G (hugetlbfs)" in verdict.message
    assert [e.line for e in verdict.evidence] == [1, 2]


# Docker's real messages (docker CLI 20.10 / 28.x) for the failures judge_exit must separate.
NO_DEVICE = (
    'docker: Error response from daemon: error gathering device information while adding custom device '
    '"/dev/tenstorrent": no such file or directory.'
)


def test_docker_125_is_an_environment_fault_with_dockers_message():
    lines = [(1, NO_DEVICE), (2, "See 'docker run --help'.")]
    verdict = judge_exit(125, False, lines, 60)
    assert verdict.category is EnvCategory.DOCKER and NO_DEVICE in verdict.message


def test_missing_image_is_an_image_fault():
    lines = [(1, "Unable to find image 'tt-harness/x:1' locally"), (2, "docker: Error response from daemon: pull access denied for tt-harness/x, repository does not exist or may require 'docker login'.")]
    assert judge_exit(125, False, lines, 60).category is EnvCategory.IMAGE


def test_command_missing_in_image_after_probe_is_a_spec_error():
    lines = [(1, "harness-probe: ok writable /dev/shm"), (2, "sh: exec: line 19: build/tt-train/tests/ttml_tests: not found")]
    verdict = judge_exit(127, False, lines, 60)
    assert verdict.outcome is Outcome.ERROR and verdict.category is HarnessErrorKind.SPEC


def test_timeout_and_normal_exits():
    assert judge_exit(None, True, [], 90).category is EnvCategory.TIMEOUT
    assert judge_exit(1, False, [(1, "harness-probe: ok writable /dev/shm")], 60) is None
    assert judge_exit(0, False, [], 60) is None
