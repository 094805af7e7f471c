"""``harness hosts check``: is each lab host fit to run checks? Preflight only; nothing runs on a card."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import List, Optional

import typer

from harness.cli.app import app
from harness.cli.common import INVENTORY_ENV, LAB_OPTION_HELP, fail_input, print_json, resolve_inventory, split_names, usage_error
from harness.core.errors import InputError
from harness.core.hostfacts import GIB, CheckStatus, PreflightReport, default_preflight_config
from harness.core.inventory import Host, Inventory, load_inventory
from harness.core.outcomes import EXIT_ENV_FAULT, EXIT_OK
from harness.core.yamlnodes import did_you_mean

MAX_PARALLEL = 16  # hosts checked at once; each check mostly waits on its host

hosts_app = typer.Typer(help="Lab hosts: check they are fit to run checks.", no_args_is_help=True)
app.add_typer(hosts_app, name="hosts")


@hosts_app.command("check")
def check(
    inventory: Optional[Path] = typer.Option(
        None, "--inventory", "-i", help=f"The lab inventory (default: ${INVENTORY_ENV}, else configs/local.yaml)."
    ),
    lab_name: Optional[str] = typer.Option(None, "--lab", help=LAB_OPTION_HELP),
    hosts: Optional[List[str]] = typer.Option(
        None, "--hosts", help="Only these hosts: names, comma-separated or the option repeated."
    ),
    as_json: bool = typer.Option(
        False, "--json", help='One JSON object per host per line: {"host", "ok", "checks": [{"name", "status", "reason", "category"}]}.'
    ),
    root: str = typer.Option(
        "/", "--root",
        help="Read each host's /sys, /dev and /proc under this folder. Real hosts use /; any other "
        "folder is a STAND-IN host tree, for tests and the simulated lab.",
    ),
    disk_min_gib: Optional[int] = typer.Option(
        None, "--disk-min-gib", min=0, help="Free GiB needed under Docker's root dir (default: configs/preflight.yaml)."
    ),
    tt_smi: str = typer.Option("tt-smi", "--tt-smi", help="The tt-smi command on the hosts (run as `tt-smi -s`)."),
) -> None:
    """Preflight every host: driver, device nodes, sysfs, firmware, heartbeat, hugepages, users
    of the cards, tt-smi, Docker and disk. Exit 0: all fit (warnings allowed); 3: a host has
    an environment fault; 2: bad input."""
    from harness.execution.connect import Connections  # SSH: only here
    from harness.execution.preflight import preflight

    path = resolve_inventory(inventory, lab_name)
    try:
        lab = load_inventory(path)
    except InputError as exc:
        raise fail_input(exc)
    chosen = _chosen(lab, hosts or [])
    if not root.startswith("/"):
        raise usage_error(f"--root must be an absolute path, got {root!r}")
    config = default_preflight_config()
    if disk_min_gib is not None:
        config = replace(config, disk_min_bytes=disk_min_gib * GIB)
    try:
        connections = Connections(lab)
        connections.check(chosen)
    except ValueError as exc:
        raise usage_error(f"{path}: {exc}")

    with connections:

        def run(host: Host) -> PreflightReport:
            return preflight(connections.transport(host), host, config=config, root=root, tt_smi=tt_smi)

        with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, max(1, len(chosen)))) as workers:
            reports = list(workers.map(run, chosen))

    if as_json:
        for report in reports:
            print_json(report.to_json())
    else:
        _print_table(reports)
    raise typer.Exit(EXIT_OK if all(report.ok for report in reports) else EXIT_ENV_FAULT)


def _chosen(lab: Inventory, options: List[str]) -> tuple[Host, ...]:
    names = split_names(options)
    known = tuple(host.name for host in lab.hosts)
    for name in names:
        if name not in known:
            raise usage_error(f"unknown host {name!r} in --hosts{did_you_mean(name, known)}; {lab.path} has: {', '.join(known)}")
    return lab.select(names=names) if names else lab.hosts


def _print_table(reports: list[PreflightReport]) -> None:
    rows = [("HOST", "CHECK", "STATUS", "REASON")]
    for report in reports:
        for check in report.checks:
            reason = " ".join(check.reason.split())  # one row per check, even for multi-line errors
            if check.category is not None:
                reason = f"[{check.category}] {reason}"
            rows.append((report.host, check.name, check.status.value, reason))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        typer.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[3])
    typer.echo("")
    for report in reports:
        if report.ok:
            warnings = sum(check.status is CheckStatus.WARN for check in report.checks)
            typer.echo(f"{report.host}: ok" + (f" ({warnings} warning{'s' * (warnings != 1)})" if warnings else ""))
        else:
            categories = ", ".join(dict.fromkeys(str(check.category) for check in report.faults))
            typer.echo(f"{report.host}: FAULT ({categories})")
