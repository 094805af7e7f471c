"""Command-line interface: thin wrappers over the library, one module per command group."""

from harness.cli.app import app
from harness.cli import build, classify, cleanup, history, hosts, lab, order_check, report, run, validate  # noqa: F401  (registers commands)


def main() -> None:
    app()
