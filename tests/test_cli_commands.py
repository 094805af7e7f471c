"""The command table: every command loads from its module on demand, and help lists them all."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys

import pytest
import typer

from harness.cli import COMMANDS
from harness.cli.app import app
from tests.paths import REPO


def harness(*args: str) -> subprocess.CompletedProcess:
    """The real entry point in a fresh interpreter: nothing imported beforehand."""
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, cwd=REPO)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_table_entry_names_the_module_that_registers_it(name):
    importlib.import_module(COMMANDS[name])
    assert name in typer.main.get_group(app).commands


def test_help_lists_every_command_in_table_order():
    done = harness("--help")
    assert done.returncode == 0, done.stderr
    listed = [m.group(1) for m in re.finditer(r"^[^\w\n]*([\w-]+)  ", done.stdout, re.MULTILINE)]
    assert [name for name in listed if name in COMMANDS] == list(COMMANDS), done.stdout


@pytest.mark.parametrize("group, sub", [("lab", "heal"), ("hosts", "check")])
def test_groups_load_with_their_subcommands(group, sub):
    done = harness(group, "--help")
    assert done.returncode == 0, done.stderr
    assert sub in done.stdout


def test_a_mistyped_command_is_a_usage_error_with_a_suggestion():
    done = harness("clasify", "x.log")
    assert done.returncode == 2
    assert "No such command 'clasify'" in done.stderr and "classify" in done.stderr.split("clasify", 1)[1]


def test_a_command_runs_when_it_is_the_only_one_loaded():
    """typer turns an app with one registered command into that command: the group must stay a group."""
    probe = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from harness.cli.app import app\n"
        "import harness.cli.classify\n"
        "result = CliRunner().invoke(app, ['classify', sys.argv[1]])\n"
        "print(result.exit_code, result.output)\n"
    )
    log = REPO / "tests" / "data" / "logs" / "gtest_layernorm_bugrepro.log"
    done = subprocess.run([sys.executable, "-c", probe, str(log)], capture_output=True, text=True, cwd=REPO)
    assert done.stdout.startswith("1 "), done.stdout + done.stderr  # the bug repro fails for real
    assert "fail" in done.stdout
