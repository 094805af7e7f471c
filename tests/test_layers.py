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


# What each quick command must not load on its way to a result (start-up, issue 10): the Docker
# and SSH stacks, typer's pydantic coercion (typer >= 0.29), the other commands, and per
# command what it has no use for. Measured by running the command itself in a fresh interpreter.
_HEAVY = ("docker", "paramiko", "requests", "pydantic", "sqlalchemy", "harness.execution", "harness.orchestration", "harness.lab.sim")
_OTHER_COMMANDS = ("harness.cli.build", "harness.cli.run", "harness.cli.hosts", "harness.cli.lab", "harness.cli.cleanup")
QUICK_COMMANDS = {
    "classify": (
        ["classify", "tests/data/logs/{log}"],
        _HEAVY + _OTHER_COMMANDS + ("harness.cli.validate", "harness.cli.order_check", "harness.mlir", "defusedxml",
                                    "multiprocessing", "harness.core.spec", "harness.core.hostfacts"),
    ),
    "order-check": (
        ["order-check", "tests/data/mlir/{mlir}"],
        _HEAVY + _OTHER_COMMANDS + ("harness.cli.validate", "harness.cli.classify", "yaml", "harness.core.classifier",
                                    "harness.core.signatures", "defusedxml", "multiprocessing"),
    ),
    "validate": (
        ["validate", "jobs/nightly.yaml"],
        _HEAVY + _OTHER_COMMANDS + ("harness.cli.classify", "harness.cli.order_check", "harness.mlir",
                                    "harness.core.classifier", "defusedxml", "multiprocessing",
                                    # a job spec needs none of the other kinds' loaders
                                    "harness.core.signatures", "harness.core.hostfacts", "harness.core.inventory",
                                    "harness.core.invocation", "harness.lab"),
    ),
}


def _first(folder: str, suffix: str) -> str:
    from tests.paths import REPO

    return sorted(p.name for p in (REPO / "tests" / "data" / folder).iterdir() if p.suffix == suffix)[0]


@pytest.mark.parametrize("command", sorted(QUICK_COMMANDS))
def test_a_quick_command_loads_only_what_it_needs(command):
    from tests.paths import REPO

    argv, forbidden = QUICK_COMMANDS[command]
    argv = [arg.format(log=_first("logs", ".log"), mlir=_first("mlir", ".mlir")) for arg in argv]
    probe = (
        "import sys\n"
        f"sys.argv = ['harness', *{argv!r}]\n"
        "from harness.cli import main\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
        "sys.stdout = sys.__stdout__\n"
        f"print('LOADED', ','.join(sorted(m for m in sys.modules if any(m == p or m.startswith(p + '.') for p in {forbidden!r}))))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO)
    assert "LOADED" in done.stdout, done.stderr
    assert done.stdout.split("LOADED", 1)[1].strip() == ""
