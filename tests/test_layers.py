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
    "harness.core.report_html", "harness.mlir.check", "harness.core.records", "harness.core.flakiness", "harness.core.historyurl",
]
FORBIDDEN = ("docker", "paramiko", "sqlalchemy", "harness.execution", "harness.orchestration", "harness.cli", "harness.history")


def loaded_by(imports: str, packages: tuple[str, ...]) -> str:
    """The modules of ``packages`` (and below) that importing ``imports`` pulls in, in a fresh
    interpreter; "" when none."""
    probe = (
        f"import sys, {imports}; "
        f"print(','.join(sorted(m for m in sys.modules if any(m == p or m.startswith(p + '.') for p in {packages!r}))))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.mark.parametrize("module", PURE)
def test_pure_module_imports_no_execution_layer(module):
    assert loaded_by(module, FORBIDDEN) == ""


def test_execution_does_not_import_orchestration_or_cli():
    assert loaded_by("harness.execution.runner, harness.execution.preflight, harness.execution.images",
                     ("harness.orchestration", "harness.cli")) == ""


def test_the_lab_imports_only_core_and_execution():
    """harness/lab is the product's own stand-in: it stands hosts up, it does not run jobs."""
    assert loaded_by("harness.lab.sim, harness.lab.faults, harness.lab.keys",
                     ("harness.orchestration", "harness.cli", "harness.mlir")) == ""


def test_the_cli_loads_docker_and_ssh_only_for_the_commands_that_use_them():
    """Startup: `harness classify`, `order-check`, `validate` and `--help` need neither (nor the
    history's database libraries)."""
    assert loaded_by("harness.cli", ("docker", "paramiko", "requests", "sqlalchemy", "alembic")) == ""


def test_the_history_imports_only_core():
    """harness/history stores and reads runs; it runs nothing and needs no SSH or Docker."""
    assert loaded_by("harness.history.store, harness.history.schema",
                     ("docker", "paramiko", "harness.execution", "harness.orchestration", "harness.cli", "harness.lab")) == ""
