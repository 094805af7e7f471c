"""The pure core needs neither Docker nor SSH: importing it must not pull them in."""

from __future__ import annotations

import subprocess
import sys

import pytest

PURE = [
    "harness.core.outcomes", "harness.core.spec", "harness.core.inventory", "harness.core.profiles",
    "harness.core.invocation", "harness.core.container_exit", "harness.core.classifier", "harness.core.ingest",
    "harness.core.junit", "harness.core.hostfacts", "harness.core.signatures", "harness.core.matrix",
    "harness.core.plan", "harness.core.events", "harness.core.lease", "harness.core.judge",
    "harness.mlir.check",
]
FORBIDDEN = ("docker", "paramiko", "harness.execution", "harness.orchestration", "harness.cli")


@pytest.mark.parametrize("module", PURE)
def test_pure_module_imports_no_execution_layer(module):
    probe = (
        f"import sys, {module}; "
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r} or m.startswith({FORBIDDEN!r})); "
        "print(','.join(bad))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "", f"{module} pulls in {done.stdout.strip()}"


def test_execution_does_not_import_orchestration_or_cli():
    probe = (
        "import sys, harness.execution.runner, harness.execution.preflight, harness.execution.images; "
        "print(','.join(sorted(m for m in sys.modules if m.startswith(('harness.orchestration', 'harness.cli')))))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def test_the_lab_imports_only_core_and_execution():
    """harness/lab is the product's own stand-in: it stands hosts up, it does not run jobs."""
    probe = (
        "import sys, harness.lab.sim, harness.lab.faults, harness.lab.keys; "
        "print(','.join(sorted(m for m in sys.modules if m.startswith(('harness.orchestration', 'harness.cli', 'harness.mlir')))))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def test_the_cli_loads_docker_and_ssh_only_for_the_commands_that_use_them():
    """Startup: `harness classify`, `order-check`, `validate` and `--help` need neither."""
    probe = (
        "import sys, harness.cli; "
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in ('docker', 'paramiko', 'requests'))))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""
