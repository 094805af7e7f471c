"""What every command shares: printing input problems, JSON lines, exit codes."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Iterable

import typer

from harness.core.configs import config_path
from harness.core.errors import InputError, Problem
from harness.core.outcomes import EXIT_USAGE


def print_problems(problems: Iterable[Problem]) -> None:
    for problem in problems:
        typer.echo(str(problem), err=True)


def fail_input(exc: InputError) -> typer.Exit:
    """Print every problem of a bad input and return the exit to raise (2: nothing ran)."""
    print_problems(exc.problems)
    return typer.Exit(EXIT_USAGE)


def usage_error(message: str) -> typer.Exit:
    """Print why the input is bad and return the exit to raise (2: nothing ran)."""
    typer.echo(message, err=True)
    return typer.Exit(EXIT_USAGE)


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, sort_keys=False) + "\n")
    sys.stdout.flush()


def split_names(options: Iterable[str]) -> tuple[str, ...]:
    """``--hosts a,b --hosts c`` -> ("a", "b", "c")."""
    return tuple(name.strip() for option in options for name in option.split(",") if name.strip())


INVENTORY_ENV = "TT_HARNESS_INVENTORY"


def default_inventory() -> Path:
    """$TT_HARNESS_INVENTORY, else configs/local.yaml (this machine through the local transport)."""
    return Path(os.environ[INVENTORY_ENV]) if os.environ.get(INVENTORY_ENV) else config_path("local.yaml")
