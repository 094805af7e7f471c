"""`harness validate`: exit codes and messages as a user sees them."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

import harness.cli  # noqa: F401  (registers the commands)
from harness.cli.app import app

REPO = Path(__file__).resolve().parents[1]


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def test_validate_the_real_jobs_and_example_inventory():
    result = run("validate", str(REPO / "jobs"), str(REPO / "configs" / "examples" / "lab.yaml"))
    assert result.exit_code == 0, result.output
    assert "layernorm-bw.yaml: ok (job layernorm-bw, 3 checks, profile full)" in result.stdout
    assert "lab.yaml: ok (inventory, 4 hosts)" in result.stdout


def test_validate_broken_spec_exits_2_with_location_and_no_traceback(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text((REPO / "jobs" / "device-smoke.yaml").read_text().replace("kind: command", "kind: comand", 1))
    result = run("validate", str(path))
    assert result.exit_code == 2
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "kind: comand" in text)
    assert f"{path}:{line}:11: check kind must be one of gtest, pytest, command, mlir-order, got 'comand' (did you mean 'command'?)" in result.stderr
    assert "Traceback" not in result.output


def test_validate_missing_file(tmp_path):
    result = run("validate", str(tmp_path / "nope.yaml"))
    assert result.exit_code == 2
    assert f"{tmp_path / 'nope.yaml'}:1:1: cannot read file: No such file or directory" in result.stderr


def test_validate_not_utf8(tmp_path):
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"name: \xff\xfe\n")
    result = run("validate", str(path))
    assert result.exit_code == 2 and f"{path}:1:1: not UTF-8 text" in result.stderr
