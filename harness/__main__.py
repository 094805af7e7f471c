"""``python -m harness``: the same as the ``harness`` command."""

from harness.cli import main

main()
