"""Hostile and careless input (issue 9): every reproduction, with the general fix's rule."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import harness.cli  # noqa: F401  (registers the commands)
from harness.cli.app import app
from harness.core.atomic import write_text
from harness.core.errors import InputError
from harness.core.files import OutputError, read_bounded
from harness.core.yamlnodes import MAX_INPUT_BYTES, load_file

REPO = Path(__file__).resolve().parents[1]
JOB = REPO / "jobs" / "nightly.yaml"
# The simulated tt-metal image (cached after its first build): a real container for a check.
SIM_IMAGE = f"image: {{project: tt-metal-sim, base: tt-harness/debian:bookworm, path: {REPO / 'harness' / 'lab' / 'standin'}}}\n"


def this_machine(tmp_path: Path) -> Path:
    """An inventory of this machine alone, through the local transport."""
    inventory = tmp_path / "local.yaml"
    inventory.write_text("hosts:\n  - {name: here, transport: local}\n")
    return inventory


def run(*args: str):
    return CliRunner().invoke(app, list(args))


# -- outputs never clobber what they point at ----------------------------------------------


def test_a_character_device_as_output_is_written_through_never_replaced(tmp_path):
    if os.geteuid() != 0:
        pytest.fail("mknod needs root; the test suite runs as root (scripts/test)", pytrace=False)
    node = tmp_path / "null"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a /dev/null of our own
    write_text(node, "<testsuites/>")
    assert stat.S_ISCHR(node.stat().st_mode)  # still the device, not a regular file


def test_a_fifo_as_output_is_written_through_and_one_nobody_reads_is_an_error_not_a_hang(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match="nobody reads"):
        write_text(fifo, "x")
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    for _ in range(50):  # until the reader has the FIFO open
        try:
            write_text(fifo, "report")
            break
        except OutputError:
            time.sleep(0.05)
    reader.join(timeout=5)
    assert got == ["report"] and stat.S_ISFIFO(fifo.stat().st_mode)


def test_run_refuses_a_folder_as_junit_and_a_file_as_out_before_anything_runs(tmp_path):
    folder = tmp_path / "dir"
    folder.mkdir()
    result = run("run", str(JOB), "--inventory", "configs/local.yaml", "--junit", str(folder), "--out", str(tmp_path / "o"))
    assert result.exit_code == 2 and "is a folder" in result.output
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    result = run("run", str(JOB), "--inventory", "configs/local.yaml", "--out", str(afile))
    assert result.exit_code == 2 and "is not a folder" in result.output
    assert afile.read_text() == "keep me"
    result = run("run", str(JOB), "--inventory", "configs/local.yaml", "--out", "/dev/null")
    assert result.exit_code == 2 and "not a folder" in result.output


# -- every read is bounded -------------------------------------------------------------------


def test_an_endless_file_is_refused_without_reading_it():
    started = time.monotonic()
    with pytest.raises(InputError, match="not a regular file"):
        load_file("/dev/zero")
    assert time.monotonic() - started < 1.0


def test_a_fifo_as_a_spec_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    started = time.monotonic()
    result = run("validate", str(fifo))
    assert result.exit_code == 2 and "not a regular file" in result.output
    assert time.monotonic() - started < 2.0


def test_a_huge_spec_is_refused_by_its_size_before_it_is_read(tmp_path):
    big = tmp_path / "big.yaml"
    with open(big, "wb") as handle:
        handle.truncate(200 * 1024 * 1024)  # sparse: 200 MB that cost nothing to make
    with pytest.raises(InputError, match=f"more than {MAX_INPUT_BYTES} are refused"):
        load_file(big)


def test_read_bounded_refuses_a_folder(tmp_path):
    with pytest.raises(InputError, match="is a directory"):
        read_bounded(tmp_path, 10)


# -- YAML aliases ----------------------------------------------------------------------------


def test_every_alias_is_refused_where_it_stands_scalars_too(tmp_path):
    spec = tmp_path / "alias.yaml"
    spec.write_text("name: &n probe\ndescription: *n\nimage: {base: x, wheel: '1'}\nchecks: []\n")
    with pytest.raises(InputError) as caught:
        load_file(spec)
    (problem,) = caught.value.problems
    assert (problem.line, problem.col) == (2, 14) and "alias *n" in problem.message


# -- path escapes and injected variables -----------------------------------------------------


@pytest.mark.parametrize("name", ["/tmp/evil", "../../../tmp/evil2", "probe\n", ".hidden"])
def test_host_names_that_are_paths_are_refused(tmp_path, name):
    from harness.core.inventory import load_inventory

    inventory = tmp_path / "inv.yaml"
    inventory.write_text(f"hosts:\n  - {{name: {name!r}, transport: local}}\n".replace("'", '"').replace("\n\"", '\\n"'))
    with pytest.raises(InputError, match="host name"):
        load_inventory(inventory)


def test_a_secret_with_a_line_break_cannot_inject_a_second_variable(tmp_path):
    from harness.core.outcomes import HarnessErrorKind, Outcome
    from harness.core.spec import load_job
    from harness.execution.runner import HostContext, Runner
    from harness.execution.transport import LocalTransport

    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: s\nimage: {base: x, wheel: '1'}\n"
        "checks:\n  - {name: c, kind: command, command: ['true'], env: {API_TOKEN: '${SECRET}'}}\n"
    )
    job = load_job(spec)
    runner = Runner(job, LocalTransport(), HostContext("here"), "never-run", "r1", tmp_path / "logs",
                    secrets={"SECRET": "a\nLD_PRELOAD=/evil.so"})
    (case,) = runner.run_check(job.check("c"))
    assert case.outcome is Outcome.ERROR and case.verdict.category is HarnessErrorKind.SPEC
    assert "line break" in case.verdict.message and "/evil.so" not in case.verdict.message


# -- valid-looking input that used to crash --------------------------------------------------


def spec_with(tmp_path: Path, check_extra: str = "", top: str = "") -> Path:
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: s\nimage: {base: x, wheel: '1'}\n" + top
        + "checks:\n  - {name: c, kind: command, command: ['true']" + check_extra + "}\n"
    )
    return spec


def test_deep_nesting_is_an_input_error_not_a_recursion_error(tmp_path):
    spec = spec_with(tmp_path, top="description: " + "[" * 500 + "]" * 500 + "\n")
    result = run("validate", str(spec))
    assert result.exit_code == 2 and "nested too deeply" in result.output


@pytest.mark.parametrize("timeout", [".inf", ".nan", "99999999999999999999999h", "-5"])
def test_timeouts_that_cannot_be_timers_are_refused(tmp_path, timeout):
    result = run("validate", str(spec_with(tmp_path, f", timeout: {timeout}")))
    assert result.exit_code == 2 and "timeout" in result.output


def test_an_argument_too_long_for_the_kernel_is_refused_at_validate(tmp_path):
    spec = spec_with(tmp_path)
    spec.write_text(spec.read_text().replace("command: ['true']", "command: ['echo', '" + "x" * 200_000 + "']"))
    result = run("validate", str(spec))
    assert result.exit_code == 2 and "characters" in result.output


# -- secrets never leak ----------------------------------------------------------------------


@pytest.mark.docker
def test_a_secret_printed_by_a_check_is_masked_in_every_output(tmp_path, monkeypatch):
    """The value reaches the container (through the 0600 env file) and the check prints it
    inside an environment signature: JUnit, summary.json, the console and the logs all mask it."""
    secret = "s3cret-" + os.urandom(6).hex()
    monkeypatch.setenv("E2E_TOKEN", secret)
    spec = tmp_path / "leak.yaml"
    spec.write_text(
        f"name: leak\n{SIM_IMAGE}"
        "checks:\n  - name: prints-it\n    kind: command\n"
        "    command: [sh, -c, 'echo \"No chips detected in the cluster (token $API_TOKEN)\" >&2; exit 1']\n"
        "    env: {API_TOKEN: '${E2E_TOKEN}'}\n"
    )
    inventory = this_machine(tmp_path)
    out = tmp_path / "out"
    result = run("run", str(spec), "--inventory", str(inventory), "--out", str(out), "--verbose")
    assert result.exit_code == 3, result.output  # the signature: an environment fault
    assert "(token ***)" in (out / "junit.xml").read_text()  # the evidence line, masked
    logs = list(out.rglob("*.log"))
    assert logs and all(stat.S_IMODE(log.stat().st_mode) == 0o600 for log in logs)
    for text in [result.output, (out / "summary.json").read_text(), (out / "junit.xml").read_text(), *(l.read_text() for l in logs)]:
        assert secret not in text


def test_the_masker_covers_every_string_of_a_summary_and_overlapping_secrets():
    from harness.core.secretref import Masker

    masker = Masker(["abcdef", "defghi", ""])
    summary = {"hosts": [{"cases": [{"message": "token abcdefghi end", "attempts": 1}]}], "note abcdef": None}
    assert masker.data(summary) == {"hosts": [{"cases": [{"message": "token *** end", "attempts": 1}]}], "note ***": None}


# -- smaller ones ----------------------------------------------------------------------------


def test_validate_checks_every_catalog_harness_ships():
    result = run("validate", str(REPO / "configs"))
    assert result.exit_code == 0, result.output
    for name in ("boards", "lab-faults", "local", "preflight", "profiles", "signatures"):
        assert f"configs/{name}.yaml: ok" in result.output


def test_validate_says_when_there_is_nothing_to_check(tmp_path):
    (tmp_path / "notes.txt").write_text("not yaml")
    result = run("validate", str(tmp_path))
    assert result.exit_code == 2 and "nothing to check" in result.output


def test_validate_finds_a_jump_host_loop(tmp_path):
    inventory = tmp_path / "loop.yaml"
    inventory.write_text(
        "hosts:\n  - {name: a, address: 10.0.0.1, jump: b}\n  - {name: b, address: 10.0.0.2, jump: a}\n"
    )
    result = run("validate", str(inventory))
    assert result.exit_code == 2 and "loop" in result.output


def test_a_name_with_a_trailing_newline_is_refused(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text('name: "probe\\n"\nimage: {base: x, wheel: "1"}\nchecks:\n  - {name: c, kind: command, command: ["true"]}\n')
    with pytest.raises(InputError, match="job name"):
        from harness.core.spec import load_job

        load_job(spec)


@pytest.mark.parametrize("address", ["::1", "fe80::1", "127.0.0.1", "lab-host.example"])
def test_addresses_ipv6_included_are_accepted(tmp_path, address):
    from harness.core.inventory import load_inventory

    inventory = tmp_path / "inv.yaml"
    inventory.write_text(f'hosts:\n  - {{name: h, address: "{address}"}}\n')
    assert load_inventory(inventory).hosts[0].address == address


@pytest.mark.parametrize("where", ["../../../../etc/shadow", "/etc/shadow", "link"])
def test_an_input_outside_the_jobs_folder_must_be_asked_for(tmp_path, where):
    from harness.core.spec import load_job

    (tmp_path / "link").symlink_to("/etc/shadow")
    spec = tmp_path / "job.yaml"
    body = f"name: s\nimage: {{base: x, wheel: '1'}}\nchecks:\n  - {{name: c, kind: mlir-order, command: [x], input: '{where}'"
    spec.write_text(body + "}\n")
    with pytest.raises(InputError, match="outside the job's folder"):
        load_job(spec)
    spec.write_text(body + ", input_anywhere: true}\n")
    job = load_job(spec)  # allowed when asked for, and said so
    assert any("outside the job's folder" in w.message for w in job.warnings)


def test_a_folder_as_input_is_called_a_folder(tmp_path):
    from harness.core.spec import load_job

    (tmp_path / "inputs").mkdir()
    spec = tmp_path / "job.yaml"
    spec.write_text("name: s\nimage: {base: x, wheel: '1'}\nchecks:\n  - {name: c, kind: mlir-order, command: [x], input: inputs}\n")
    with pytest.raises(InputError, match="is a folder"):
        load_job(spec)


def test_a_profile_that_widens_the_container_is_warned_about(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: s\nimage: {base: x, wheel: '1'}\n"
        "profile: {name: wide, privileged: true, mounts: ['/:/host'], cap_add: [SYS_ADMIN, SYS_NICE]}\n"
        "checks:\n  - {name: c, kind: command, command: ['true']}\n"
    )
    result = run("validate", str(spec))
    assert result.exit_code == 0
    assert "is privileged" in result.output and "binds the host's /" in result.output and "SYS_ADMIN" in result.output
    assert "SYS_NICE" not in result.output


def test_run_refuses_a_privileged_container_where_the_inventory_does_not_allow_it(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: s\nimage: {base: x, wheel: '1'}\nprofile: {name: wide, privileged: true}\n"
        "checks:\n  - {name: c, kind: command, command: ['true']}\n"
    )
    inventory = this_machine(tmp_path)
    result = run("run", str(spec), "--inventory", str(inventory), "--out", str(tmp_path / "out"), "--quiet")
    assert result.exit_code == 1, result.output  # a harness/spec error: nothing ran
    assert "does not allow" in (tmp_path / "out" / "summary.json").read_text()


def test_an_unreadable_checkout_is_a_message_not_a_traceback(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("name: s\nimage: {base: x, path: /proc/sys/vm}\nchecks:\n  - {name: c, kind: command, command: ['true']}\n")
    result = run("render", str(spec))
    assert result.exit_code == 2 and "cannot read /proc/sys/vm/" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.ssh
@pytest.mark.parametrize("which", ["identity_file", "known_hosts"])
def test_dev_zero_as_a_key_or_known_hosts_is_refused_not_read(tmp_path, sshd, which):
    from dataclasses import replace

    from harness.execution.transport import SshPool, TransportError

    target = replace(sshd.target(), **{which: "/dev/zero"})
    with SshPool() as pool, pytest.raises(TransportError) as caught:
        pool.get(target).run(["true"], timeout=30)
    assert "not a regular file" in caught.value.message


@pytest.mark.parametrize("name", ["/dev/stdin", "-"])
def test_classify_reads_a_pipe_and_numbers_its_lines(name):
    import subprocess
    import sys

    log = b"x\n[ RUN      ] A.B\n2025-11-07 21:59:20.155 | critical |          Always | No chips detected in the cluster (assert.hpp:103)\n"
    done = subprocess.run([sys.executable, "-m", "harness", "classify", name], input=log, capture_output=True, timeout=60, cwd=REPO)
    assert done.returncode == 3, done.stderr
    assert done.stdout.startswith(f"{name}: env_fault (device-missing)".encode())
    assert b"    3: 2025-11-07" in done.stdout


def test_classify_refuses_a_junit_report_on_standard_input():
    import subprocess
    import sys

    report = (Path(__file__).parent / "data" / "xml" / "gtest_layernorm_pass.xml").read_bytes()
    done = subprocess.run([sys.executable, "-m", "harness", "classify", "-"], input=report, capture_output=True, timeout=60, cwd=REPO)
    assert done.returncode == 2 and b"Traceback" not in done.stderr
    assert b"-: cannot read: a JUnit report is read from a file, not standard input: save it first" in done.stderr


def test_classify_caps_what_it_echoes(tmp_path):
    log = tmp_path / "huge-name.log"
    log.write_text(f"[ RUN      ] Suite.{'x' * 100_000}\nNo chips detected in the cluster\n")
    result = run("classify", str(log))
    assert result.exit_code == 3 and len(result.output) < 10_000 and "more characters" in result.output


def test_an_alias_cycle_is_named_in_a_bounded_line(tmp_path):
    module = tmp_path / "cycle.mlir"
    n = 5000
    module.write_text("".join(f"#loc{i} = loc(#loc{(i + 1) % n})\n" for i in range(n)) + 'module {\n} loc(#loc0)\n')
    result = run("order-check", str(module))
    assert result.exit_code == 2 and "cycle" in result.output and len(result.output) < 5_000, result.output[:500]


def test_an_index_too_long_is_named_not_taken_for_no_index(tmp_path):
    module = tmp_path / "long.mlir"
    module.write_text('module {\n  %0 = "ttir.add"() : () -> () loc("DEBUG|123456789012345678901234567890|x")\n}\n')
    result = run("order-check", str(module))
    assert result.exit_code == 2 and "30 digits" in result.output and "line 2" in result.output


# -- what the long fuzzing run found ---------------------------------------------------------


def test_an_unknown_xml_encoding_is_an_ingest_error(tmp_path):
    from harness.core.ingest import IngestError, read_junit

    report = tmp_path / "r.xml"
    report.write_bytes(b'<?xml version="1.0" encoding="TF-8"?>\n<testsuites/>\n')
    with pytest.raises(IngestError, match="encoding"):
        read_junit(report)


def test_a_path_too_long_for_the_system_is_an_input_error(tmp_path):
    from harness.core.spec import load_job

    spec = tmp_path / "job.yaml"
    spec.write_text("name: s\nimage: {base: x, path: '" + "a" * 5000 + "'}\nchecks:\n  - {name: c, kind: command, command: ['true']}\n")
    with pytest.raises(InputError, match="cannot be used"):
        load_job(spec)


@pytest.mark.docker
def test_a_secret_file_reaches_the_container_read_only_and_no_argv_or_env(tmp_path, monkeypatch):
    import hashlib
    import json

    secret = "file-s3cret-" + os.urandom(6).hex()
    monkeypatch.setenv("E2E_FILE_TOKEN", secret)
    spec = tmp_path / "files.yaml"
    spec.write_text(
        f"name: files\n{SIM_IMAGE}"
        "checks:\n  - name: reads-it\n    kind: command\n"
        "    command: [sh, -c, 'sha256sum /run/secrets/TOKEN; env | grep -c file-s3cret || true; "
        "if echo x > /run/secrets/TOKEN 2>/dev/null; then echo WRITABLE; fi']\n"
        "    secret_files: {TOKEN: '${E2E_FILE_TOKEN}'}\n"
    )
    inventory = this_machine(tmp_path)
    out = tmp_path / "out"
    result = run("run", str(spec), "--inventory", str(inventory), "--out", str(out), "--quiet")
    assert result.exit_code == 0, result.output
    (stdout,) = [p.read_text() for p in out.rglob("stdout.log")]
    assert hashlib.sha256(secret.encode()).hexdigest() in stdout  # the container read the value
    assert stdout.splitlines()[1] == "0"  # not in the container's environment
    assert "WRITABLE" not in stdout
    assert secret not in json.dumps(json.loads((out / "summary.json").read_text()))
