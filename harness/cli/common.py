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


LAB_OPTION_HELP = (
    "Use a simulated lab's inventory instead: `sim` (STAND-IN hosts, no card), brought up if it is "
    "down, with one host carrying `no-hugepages` (see `harness lab`)."
)


def resolve_inventory(inventory: Path | None, lab: str | None) -> Path:
    """--inventory, else --lab's inventory (bringing the lab up when it is down), else the default."""
    if lab is None:
        return inventory or default_inventory()
    if inventory is not None:
        raise usage_error("--inventory and --lab name the hosts twice: give one")
    from harness.cli.lab import open_lab  # the lab (and Docker) only when asked for
    from harness.lab.sim import DEFAULT_HOSTS, LabError, host_name

    sim = open_lab(lab)
    try:
        status = sim.status()
        if not status.up or status.inventory is None:
            faults = {} if status.hosts else {host_name(lab, DEFAULT_HOSTS): ["no-hugepages"]}
            status = sim.up(DEFAULT_HOSTS, faults)
    except LabError as exc:
        typer.echo(f"lab {lab}: {exc}", err=True)
        raise typer.Exit(3)
    assert status.inventory is not None
    return status.inventory
