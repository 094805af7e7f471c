"""`harness classify FILE...` as a user runs it: human and JSON output, exit codes 0/1/3/2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import harness.cli  # noqa: F401  (registers the commands)
from harness.cli.app import app

DATA = Path(__file__).parent / "data"
NO_DEVICE_LOG = DATA / "logs" / "gtest_layernorm_no_device.log"
BUGREPRO_LOG = DATA / "logs" / "gtest_layernorm_bugrepro.log"
PASS_LOG = DATA / "logs" / "gtest_layernorm_pass_hugepage_warnings.log"
HANG_LOG = DATA / "logs" / "gtest_layernorm_pcie_hang.log"
NO_DEVICE_XML = DATA / "xml" / "gtest_layernorm_no_device.xml"
PYTEST_XML = DATA / "xml" / "pytest_xunit2.xml"


def run(*args) -> object:
    return CliRunner().invoke(app, ["classify", *map(str, args)])


@pytest.mark.parametrize(
    "path, code, outcome",
    [
        (PASS_LOG, 0, "pass"),
        (BUGREPRO_LOG, 1, "fail"),
        (NO_DEVICE_LOG, 3, "env_fault (device-missing)"),
        (HANG_LOG, 3, "env_fault (device-hang)"),
        (NO_DEVICE_XML, 3, "env_fault (device-missing)"),
        (PYTEST_XML, 1, "fail"),
    ],
)
def test_one_file_exit_code_and_human_line(path, code, outcome):
    result = run(path)
    assert result.exit_code == code
    assert result.stdout.startswith(f"{path}: {outcome}: ")


def test_human_output_indents_evidence_with_line_numbers_and_signatures():
    result = run(HANG_LOG)
    assert result.stdout.splitlines()[1:] == [
        "    27:   what():  Read 0xffffffff from PCIE: you should reset the board.  [umd-pcie-read-all-ones]"
    ]


def test_json_lines_one_object_per_file():
    result = run("--json", NO_DEVICE_LOG, NO_DEVICE_XML)
    assert result.exit_code == 3
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["file"], r["outcome"], r["category"]) for r in records] == [
        (str(NO_DEVICE_LOG), "env_fault", "device-missing"),
        (str(NO_DEVICE_XML), "env_fault", "device-missing"),
    ]
    assert records[0]["evidence"][0] == {
        "line": 8,
        "text": "2025-12-17 10:15:03.141 | critical |          Always | TT_FATAL: No chips detected in the cluster (assert.hpp:104)",
        "signature": "metal-no-chips",
    }
    assert "cases" not in records[0]
    cases = records[1]["cases"]
    assert len(cases) == 5
    assert {(c["classname"], c["outcome"], c["category"]) for c in cases} == {
        ("LayerNormBackwardOpTest", "env_fault", "device-missing")
    }
    assert cases[0]["evidence"][1] == {"line": 8, "text": "No chips detected in the cluster", "signature": "metal-no-chips"}


@pytest.mark.parametrize(
    "files, code",
    [
        ([PASS_LOG, NO_DEVICE_LOG], 3),  # env fault over pass
        ([NO_DEVICE_LOG, BUGREPRO_LOG], 1),  # real failure over env fault
        ([BUGREPRO_LOG, "missing.log"], 2),  # unreadable input over everything
        ([PASS_LOG, PASS_LOG], 0),
    ],
)
def test_exit_code_is_the_worst_over_files(files, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run(*files).exit_code == code


def test_unreadable_files_are_reported_on_stderr_without_traceback(tmp_path):
    missing = tmp_path / "missing.log"
    result = run("--json", missing, tmp_path, PASS_LOG)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"{missing}: cannot read: No such file or directory",
        f"{tmp_path}: cannot read: Is a directory",
    ]
    assert "Traceback" not in result.stdout + result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["outcome"], r["category"]) for r in records] == [("error", "artifact"), ("error", "artifact"), ("pass", None)]


def test_hostile_and_malformed_xml_exit_2(tmp_path):
    evil = tmp_path / "evil.xml"
    evil.write_text('<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "b">]><testsuites>&a;</testsuites>')
    broken = tmp_path / "broken.xml"
    broken.write_text("<testsuites><testsuite>")
    result = run(evil, broken)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"{evil}: cannot read: DTDs are not allowed in test reports (entity expansion is refused)",
        f"{broken}: cannot read: malformed XML at line 1, column 24: no element found",
    ]


def test_a_log_that_is_not_utf8_is_still_classified(tmp_path):
    path = tmp_path / "binary.log"
    path.write_bytes(b"\xff\xfe garbage \x00\n[ RUN      ] A.B\nNo chips detected in the cluster\n[  FAILED  ] A.B (0 ms)\n")
    result = run("--json", path)
    assert result.exit_code == 3
    assert json.loads(result.stdout)["evidence"][0]["line"] == 3
