"""Command-line interface: thin wrappers over the library, one module per command group."""

from harness.cli.app import app
from harness.cli import build, classify, cleanup, hosts, lab, order_check, run, slurm, validate  # noqa: F401  (registers commands)


def main() -> None:
    app()
