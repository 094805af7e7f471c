"""The runner on the real Docker engine, locally and over a real loopback sshd.

There is no Tenstorrent card here. The card is stood in for by a character device node made
with mknod and bound in as /dev/tenstorrent/0, and tt-train's ttml_tests by a STAND-IN gtest
binary (tests/data/logs/gtest_fake_layernorm_bw_test.cpp, real googletest, linked statically)
that prints what the real one prints in each situation. Everything else is real: docker run
with the profile's options, the in-container probe, the gtest XML, the classifier.
"""

from __future__ import annotations

import os
import stat
import subprocess
import textwrap
from pathlib import Path

import pytest
import xmlschema

from harness.core import junit
from harness.core.outcomes import EnvCategory, HarnessErrorKind, Outcome, SuiteResult
from harness.core.spec import load_job
from harness.execution.runner import HostContext, Runner
from harness.execution.transport import LocalTransport, SshPool
from tests.images import build_standin_image, docker_client
from tests.paths import JUNIT_XSD

REPO = Path(__file__).resolve().parents[1]
STANDIN_SOURCE = REPO / "tests" / "data" / "logs" / "gtest_fake_layernorm_bw_test.cpp"
STANDIN_IMAGE = "tt-harness-test/standin-ttml:1"

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def standin_image(tmp_path_factory) -> str:
    """busybox + the stand-in ttml_tests, built from source through the real engine."""
    work = tmp_path_factory.mktemp("standin")
    binary = work / "ttml_tests"
    built = subprocess.run(
        ["g++", "-static", "-O1", "-std=c++17", str(STANDIN_SOURCE), "-lgtest", "-lgtest_main", "-pthread", "-o", str(binary)],
        capture_output=True, text=True,
    )
    if built.returncode != 0:
        pytest.fail(f"cannot build the stand-in gtest binary (needs g++ and libgtest-dev):\n{built.stderr}", pytrace=False)
    build_standin_image(STANDIN_IMAGE, {"ttml_tests": binary})
    return STANDIN_IMAGE


@pytest.fixture
def standin_card(tmp_path) -> Path:
    """A stand-in host: a char device node for the card and a sysfs tree with its class folder
    (bound over the container's /sys, as the `full` profile binds the host's)."""
    root = tmp_path / "host"
    (root / "sys" / "class" / "tenstorrent" / "tenstorrent!0").mkdir(parents=True)
    node = root / "tenstorrent0"
    os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    return root


def _job(tmp_path: Path, card: Path, checks: str, extra_mounts: str = "") -> Path:
    spec = tmp_path / "job.yaml"
    spec.write_text(
        textwrap.dedent(
            f"""\
            name: runner-test
            image: {{base: ubuntu:22.04, wheel: 0.81.1}}
            device: {{arch: wormhole_b0, board: n150}}
            profile:
              name: standin
              devices: ["{card}/tenstorrent0:/dev/tenstorrent/0"]
              mounts:
                - "{card}/sys:/sys"
            """
        )
        + extra_mounts
        + "checks:\n"
        + textwrap.indent(textwrap.dedent(checks), "  ")
    )
    return spec


def _runner(job_path: Path, tmp_path: Path, transport=None, iommu: bool = True, **kw) -> Runner:
    # iommu=True: the stand-in host has no hugetlbfs, as an IOMMU host needs none.
    job = load_job(job_path)
    host = HostContext(name="standin", device_ids=(0,), iommu=iommu)
    return Runner(job, transport or LocalTransport("standin"), host, kw.pop("image", STANDIN_IMAGE), "t" + os.urandom(3).hex(), tmp_path / "logs", **kw)


def _validates(job_name: str, cases) -> None:
    xml = junit.render([SuiteResult(job_name, "standin", tuple(cases))])
    xmlschema.XMLSchema(str(JUNIT_XSD)).validate(xml.decode())


BUGREPRO = ["BugRepro_Deterministic_256Tiles", "BugRepro_Deterministic_128Tiles"]  # in the stand-in binary
GTEST = """\
- name: bugrepro
  kind: gtest
  binary: /usr/local/bin/ttml_tests
  filter: "*BugRepro*"
  env: {{FAKE_MODE: {mode}}}
  timeout: 60
"""


def test_known_bug_fails_per_test_as_xfail(standin_image, standin_card, tmp_path):
    spec = _job(tmp_path, standin_card, GTEST.format(mode="ok") + "  expect: fail\n  reason: accumulator overwritten\n")
    runner = _runner(spec, tmp_path)
    cases = runner.run_check(load_job(spec).check("bugrepro"))
    assert [c.name for c in cases] == BUGREPRO
    assert {c.outcome for c in cases} == {Outcome.XFAIL}
    deterministic = next(c for c in cases if c.name == "BugRepro_Deterministic_256Tiles")
    assert any(e.text.startswith("Value of: xt::allclose(metal_dx_flat") for e in deterministic.verdict.evidence)
    _validates("runner-test", cases)


def test_mis_mounted_setup_is_an_environment_fault_for_every_test(standin_image, standin_card, tmp_path):
    spec = _job(tmp_path, standin_card, GTEST.format(mode="nodev"))
    cases = _runner(spec, tmp_path).run_check(load_job(spec).check("bugrepro"))
    assert [c.name for c in cases] == BUGREPRO
    assert {(c.outcome, c.verdict.category) for c in cases} == {(Outcome.ENV_FAULT, EnvCategory.DEVICE_MISSING)}
    _validates("runner-test", cases)


def test_crash_without_xml_is_judged_from_the_log(standin_image, standin_card, tmp_path):
    # In the stand-in, the NIGHTLY test is the one that hangs the board and aborts.
    checks = GTEST.format(mode="hang").replace('"*BugRepro*"', "LayerNormBackwardOpTest.NIGHTLY_*")
    spec = _job(tmp_path, standin_card, checks)
    (case,) = _runner(spec, tmp_path).run_check(load_job(spec).check("bugrepro"))
    assert case.outcome is Outcome.ENV_FAULT and case.verdict.category is EnvCategory.DEVICE_HANG
    assert "tt-smi -r" in case.verdict.message


def test_missing_hugepage_mount_stops_the_test_before_it_starts(standin_image, standin_card, tmp_path):
    # A plain folder where UMD expects a hugetlbfs: the probe looks at /proc/mounts, not names.
    plain = tmp_path / "not-hugetlbfs"
    plain.mkdir()
    spec = _job(tmp_path, standin_card, GTEST.format(mode="ok"), extra_mounts="")
    text = spec.read_text().replace(
        '    - "' + str(standin_card), f'    - "{plain}:/dev/hugepages-1G"\n    - "' + str(standin_card), 1
    )
    spec.write_text(text)
    (case,) = _runner(spec, tmp_path, iommu=False).run_check(load_job(spec).check("bugrepro"))
    assert case.outcome is Outcome.ENV_FAULT and case.verdict.category is EnvCategory.MOUNT
    assert "/dev/hugepages-1G (hugetlbfs)" in case.verdict.message
    assert case.verdict.evidence[0].text == "harness-probe: MISSING hugetlbfs /dev/hugepages-1G"


def test_missing_card_on_the_host_is_dockers_exit_125(standin_image, tmp_path):
    # The `full` profile passes --device /dev/tenstorrent, which this machine does not have.
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: nocard\nimage: {base: ubuntu:22.04, wheel: 0.81.1}\ndevice: {arch: wormhole_b0, board: n150}\n"
        "checks:\n  - {name: smoke, kind: command, command: ['true'], timeout: 60}\n"
    )
    (case,) = _runner(spec, tmp_path).run_check(load_job(spec).check("smoke"))
    assert case.outcome is Outcome.ENV_FAULT and case.verdict.category is EnvCategory.DOCKER
    assert "error gathering device information" in case.verdict.message and "/dev/tenstorrent" in case.verdict.message


def test_repeats_with_mixed_results_are_flaky(standin_image, standin_card, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    # Fails on attempts 1 and 3 of 4: a counter on the host, bound into the container.
    checks = """\
    - name: coin
      kind: command
      command: [sh, -c, "n=$(cat /state/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /state/n; [ $((n % 2)) = 0 ] || { echo 'AssertionError: PCC 0.41 below 0.99'; exit 1; }; echo '1 passed'"]
      repeat: 4
      timeout: 60
    """
    spec = _job(tmp_path, standin_card, checks)
    spec.write_text(spec.read_text().replace("  mounts:\n", f'  mounts:\n    - "{state}:/state"\n', 1))
    (case,) = _runner(spec, tmp_path).run_check(load_job(spec).check("coin"))
    assert case.outcome is Outcome.FLAKY and case.verdict.message == "failed 2 of 4 attempts"
    assert [a.verdict.outcome for a in case.attempts] == [Outcome.FAIL, Outcome.PASS, Outcome.FAIL, Outcome.PASS]
    xml = junit.render([SuiteResult("runner-test", "standin", (case,))]).decode()
    assert xml.count("<flakyFailure") == 2
    _validates("runner-test", [case])


def test_timeout_stops_and_removes_the_container(standin_image, standin_card, tmp_path):
    spec = _job(tmp_path, standin_card, "- {name: stuck, kind: command, command: [sleep, '300'], timeout: 3}\n")
    runner = _runner(spec, tmp_path)
    (case,) = runner.run_check(load_job(spec).check("stuck"))
    assert case.outcome is Outcome.ENV_FAULT and case.verdict.category is EnvCategory.TIMEOUT
    left = docker_client().containers.list(all=True, filters={"label": f"harness.run={runner.run_id}"})
    assert left == []


def test_command_not_in_image_is_a_spec_error(standin_image, standin_card, tmp_path):
    spec = _job(tmp_path, standin_card, "- {name: typo, kind: command, command: [/usr/local/bin/ttml_test], timeout: 60}\n")
    (case,) = _runner(spec, tmp_path).run_check(load_job(spec).check("typo"))
    assert case.outcome is Outcome.ERROR and case.verdict.category is HarnessErrorKind.SPEC


def test_secret_reaches_the_container_but_no_argv_or_log(standin_image, standin_card, tmp_path):
    checks = """\
    - name: secret
      kind: command
      command: [sh, -c, "[ \\"$HF_TOKEN\\" = s3cr3t-value ] && echo '1 passed' || exit 1"]
      env: {HF_TOKEN: "${HF_TOKEN}"}
      timeout: 60
    """
    spec = _job(tmp_path, standin_card, checks)
    seen: list[str] = []
    runner = _runner(spec, tmp_path, on_line=seen.append, secrets={"HF_TOKEN": "s3cr3t-value"})
    (case,) = runner.run_check(load_job(spec).check("secret"))
    assert case.outcome is Outcome.PASS, case.verdict
    logs = "".join(p.read_text() for p in (tmp_path / "logs").rglob("*.log"))
    assert "s3cr3t-value" not in logs and not any("s3cr3t-value" in line for line in seen)


HOSTILE = ["$(touch {marker})", "`touch {marker}`", "a'b\"c", "line1\nline2", "; touch {marker}", "| true", "&& true", "*", "-rf"]


def _hostile_check(marker: Path) -> tuple[str, list[str]]:
    args = [a.format(marker=marker) for a in HOSTILE]
    check = {"name": "hostile", "kind": "command", "command": ["printf", "[%s]", *args], "timeout": 60}
    import json

    return "- " + json.dumps(check) + "\n", args


def test_hostile_arguments_arrive_verbatim_locally(standin_image, standin_card, tmp_path):
    marker = tmp_path / "pwned"
    check, args = _hostile_check(marker)
    spec = _job(tmp_path, standin_card, check)
    seen: list[str] = []
    (case,) = _runner(spec, tmp_path, on_line=seen.append).run_check(load_job(spec).check("hostile"))
    stdout = (next((tmp_path / "logs").rglob("stdout.log"))).read_text()
    assert stdout == "".join(f"[{a}]" for a in args)
    assert not marker.exists()


@pytest.mark.ssh
def test_the_same_run_over_ssh(standin_image, standin_card, tmp_path, sshd):
    """A gtest check and hostile arguments through a real sshd on loopback: same results."""
    marker = tmp_path / "pwned"
    check, args = _hostile_check(marker)
    spec = _job(tmp_path, standin_card, GTEST.format(mode="nodev") + check)
    job = load_job(spec)
    with SshPool() as pool:
        runner = _runner(spec, tmp_path, transport=pool.get(sshd.target()))
        cases = runner.run_check(job.check("bugrepro"))
        (hostile,) = runner.run_check(job.check("hostile"))
    assert [c.name for c in cases] == BUGREPRO and {c.verdict.category for c in cases} == {EnvCategory.DEVICE_MISSING}
    stdout = next(p for p in (tmp_path / "logs" / "hostile").rglob("stdout.log")).read_text()
    assert stdout == "".join(f"[{a}]" for a in args)
    assert not marker.exists()


@pytest.mark.ssh
def test_connection_lost_mid_run_then_leftover_container_removed(standin_image, standin_card, tmp_path, sshd):
    """The SSH connection dies while a check runs: env_fault/ssh. The host sees the harness's
    lifeline close and removes the container itself; whatever might still be left is swept as
    soon as the host answers again."""
    import threading
    import time

    checks = (
        "- {name: long, kind: command, command: [sleep, '120'], timeout: 100}\n"
        "- {name: next, kind: command, command: ['true'], timeout: 60}\n"
    )
    spec = _job(tmp_path, standin_card, checks)
    job = load_job(spec)
    engine = docker_client()
    with SshPool() as pool:
        runner = _runner(spec, tmp_path, transport=pool.get(sshd.target()))
        label = {"label": f"harness.run={runner.run_id}"}

        def cut_when_running() -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not engine.containers.list(filters=label):
                time.sleep(0.2)
            sshd.drop_connections()

        cutter = threading.Thread(target=cut_when_running)
        cutter.start()
        (lost,) = runner.run_check(job.check("long"))
        cutter.join()
        assert lost.outcome is Outcome.ENV_FAULT and lost.verdict.category is EnvCategory.SSH
        assert "connection lost" in lost.verdict.message and "removes the check's container when it sees the harness gone" in lost.verdict.message
        deadline = time.monotonic() + 30
        while engine.containers.list(all=True, filters=label) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert engine.containers.list(all=True, filters=label) == []  # the host removed it by itself

        (after,) = runner.run_check(job.check("next"))
    assert after.outcome is Outcome.PASS
    assert engine.containers.list(all=True, filters=label) == []
