"""The simulated lab's catalog, host tool and CLI, without starting a lab (see test_lab_e2e.py)."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

import harness.cli  # noqa: F401  (registers the commands)
from harness.cli.app import app
from harness.core.outcomes import EnvCategory
from harness.lab.faults import default_faults
from harness.lab.sim import HOST_IMAGE_DIR, _parse_status

TT_SIM = HOST_IMAGE_DIR / "tt-sim"


def test_every_catalog_fault_is_implemented_by_the_host_tool_and_nothing_else():
    script = TT_SIM.read_text()
    body = script[script.index("fault() {"):script.index("heal() {")]
    implemented = set(re.findall(r"^\s+([a-z-]+)\)", body, re.MULTILINE))
    assert implemented == set(default_faults())


def test_every_fault_names_a_distinct_environment_category():
    categories = [fault.category for fault in default_faults().values()]
    assert all(isinstance(c, EnvCategory) for c in categories)
    assert len(set(categories)) == len(categories)  # each fault is told apart by its category


def test_host_status_lines_are_read_into_a_status():
    text = (
        "fault\tno-hugepages\nfault\thang\nservice\tsshd\tup\nservice\tdockerd\tdown\ncard\t0\thung\n"
        "container\tharness-x-smoke-1\ttt-harness/nightly:abc\t3 seconds ago\tdevice-smoke\nnonsense line\n"
    )
    status = _parse_status("sim-wh-01", "127.0.0.1:2222", text)
    assert status.faults == ("no-hugepages", "hang")
    assert status.services == {"sshd": "up", "dockerd": "down"}
    assert status.cards == {0: "hung"}
    assert status.running == ("device-smoke (3 seconds ago)",)


def test_lab_cli_refuses_bad_fault_arguments_before_touching_docker():
    runner = CliRunner()
    bad_syntax = runner.invoke(app, ["lab", "up", "--fault", "sim-wh-01"])
    assert bad_syntax.exit_code == 2 and "HOST=FAULT" in bad_syntax.output
    unknown = runner.invoke(app, ["lab", "fault", "sim-wh-01", "hung"])
    assert unknown.exit_code == 2 and "did you mean 'hang'" in unknown.output


def test_run_refuses_both_an_inventory_and_a_lab(tmp_path: Path):
    result = CliRunner().invoke(app, ["run", "jobs/nightly.yaml", "--lab", "sim", "--inventory", "configs/local.yaml"])
    assert result.exit_code == 2 and "--inventory and --lab" in result.output
