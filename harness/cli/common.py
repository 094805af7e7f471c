"""What every command shares: printing input problems, JSON lines, exit codes."""

from __future__ import annotations

import json
import sys
from typing import Any, Iterable

import typer

from harness.core.errors import InputError, Problem
from harness.core.outcomes import EXIT_USAGE


def print_problems(problems: Iterable[Problem]) -> None:
    for problem in problems:
        typer.echo(str(problem), err=True)


def fail_input(exc: InputError) -> typer.Exit:
    """Print every problem of a bad input and return the exit to raise (2: nothing ran)."""
    print_problems(exc.problems)
    return typer.Exit(EXIT_USAGE)


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, sort_keys=False) + "\n")
    sys.stdout.flush()
