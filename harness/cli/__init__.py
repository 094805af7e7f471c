"""Command-line interface: thin wrappers over the library, one module per command group."""

from harness.cli.app import app

# Every command: its name -> the module that registers it on `app`, imported only when the
# command runs (or when help lists them all). One line per command, in the order help lists them.
COMMANDS = {
    "build": "harness.cli.build",
    "classify": "harness.cli.classify",
    "cleanup": "harness.cli.cleanup",
    "history": "harness.cli.history",
    "order-check": "harness.cli.order_check",
    "report": "harness.cli.report",
    "run": "harness.cli.run",
    "validate": "harness.cli.validate",
    "render": "harness.cli.validate",
    "hosts": "harness.cli.hosts",
    "lab": "harness.cli.lab",
    "slurm": "harness.cli.slurm",
}


def main() -> None:
    app()
