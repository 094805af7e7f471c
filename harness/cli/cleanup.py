"""``harness cleanup``: remove what earlier runs left on the hosts (never a live run's)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from harness.cli.app import app
from harness.cli.common import INVENTORY_ENV, LAB_OPTION_HELP, fail_input, resolve_inventory, split_names, usage_error
from harness.core.errors import InputError
from harness.core.inventory import load_inventory
from harness.core.outcomes import EXIT_ENV_FAULT


@app.command("cleanup")
def cleanup(
    inventory: Optional[Path] = typer.Option(None, "--inventory", "-i", help=f"The lab inventory (default: ${INVENTORY_ENV}, else configs/local.yaml)."),
    lab_name: Optional[str] = typer.Option(None, "--lab", help=LAB_OPTION_HELP),
    hosts: Optional[List[str]] = typer.Option(None, "--hosts", help="Only these hosts: names, comma-separated or the option repeated."),
) -> None:
    """Remove containers (label harness.run) and work folders of runs that no longer run, on
    every host. Exit 0; 3 when a host could not be reached."""
    from harness.execution.cleanup import cleanup as clean_host  # SSH and Docker: only here
    from harness.execution.connect import Connections
    from harness.execution.images import host_docker_command
    from harness.execution.transport import TransportError

    try:
        lab = load_inventory(resolve_inventory(inventory, lab_name))
    except InputError as exc:
        raise fail_input(exc)
    names = split_names(hosts or [])
    unknown = [n for n in names if n not in {h.name for h in lab.hosts}]
    if unknown:
        raise usage_error(f"no host named {unknown[0]!r} in {lab.path}")
    status = 0
    with Connections(lab) as connections:
        for host in lab.select((), names):
            try:
                done = clean_host(connections.transport(host), host_docker_command(host))
            except TransportError as exc:
                typer.echo(f"{host.name}: not reached: {exc.message}", err=True)
                status = EXIT_ENV_FAULT
                continue
            typer.echo(f"{host.name}: removed {len(done.removed)}" + "".join(f"\n  {r}" for r in done.removed))
    raise typer.Exit(status)
