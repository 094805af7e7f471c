"""``harness lab``: the simulated Wormhole lab (STAND-IN hosts, no card) on this machine's Docker."""

from __future__ import annotations

from typing import List, Optional

import typer

from harness.cli.app import app
from harness.cli.common import fail_input, print_json, usage_error
from harness.core.errors import InputError
from harness.core.outcomes import EXIT_ENV_FAULT
from harness.lab import DEFAULT_HOSTS
from harness.lab.faults import default_faults

LAB_NAMES = ("sim",)
lab_app = typer.Typer(
    help="The simulated lab: STAND-IN Wormhole hosts (sshd, Docker engine, simulated card) in "
    "containers on this machine, reached over SSH like real ones.",
    no_args_is_help=True,
)
app.add_typer(lab_app, name="lab")

_FAULT_HELP = "Faults: " + ", ".join(default_faults()) + " (configs/lab-faults.yaml)."


def open_lab(name: str = "sim", quiet: bool = False):
    from harness.lab.sim import SimLab  # Docker: only when a lab command runs

    if name not in LAB_NAMES:
        raise usage_error(f"unknown lab {name!r}; the one lab is: {', '.join(LAB_NAMES)}")
    return SimLab(name, on_progress=None if quiet else (lambda line: typer.echo(line, err=True)))


@lab_app.command("up")
def up(
    hosts: int = typer.Option(DEFAULT_HOSTS, "--hosts", min=1, max=16, help="How many hosts (sim-wh-01 ...)."),
    faults: Optional[List[str]] = typer.Option(None, "--fault", help=f"HOST=FAULT, repeatable. {_FAULT_HELP}"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress lines."),
    slurm: bool = typer.Option(False, "--slurm", help="Also run Slurm: slurmd + munged on every host, and a controller sim-ctl (slurmctld, the shared results folder, the login node); the inventory names the cluster `sim`."),
) -> None:
    """Bring the lab up (idempotent: running hosts are left as they are) and write its inventory."""
    wanted: dict[str, list[str]] = {}
    for item in faults or []:
        host, sep, fault = item.partition("=")
        if not sep or not host or not fault:
            raise usage_error(f"--fault takes HOST=FAULT, got {item!r}")
        wanted.setdefault(host, []).append(fault)
    status = _act(lambda lab: lab.up(hosts, wanted, slurm=slurm), quiet)
    _print_status(status)


@lab_app.command("down")
def down(quiet: bool = typer.Option(False, "--quiet", "-q")) -> None:
    """Remove every container, volume and network of the lab (images stay, as a cache)."""
    removed = _act(lambda lab: lab.down(), quiet)
    typer.echo(f"lab sim: removed {len(removed)} object(s)" + "".join(f"\n  {r}" for r in removed))


@lab_app.command("status")
def status(as_json: bool = typer.Option(False, "--json", help="One JSON object: {lab, up, inventory, hosts: [...]}.")) -> None:
    """Hosts, their faults and what each is running. Exit 0 up, 3 down or partly down."""
    report = _act(lambda lab: lab.status(), True)
    if as_json:
        print_json(report.to_json())
    else:
        _print_status(report)
    raise typer.Exit(0 if report.up else EXIT_ENV_FAULT)


@lab_app.command("fault")
def fault(host: str = typer.Argument(...), name: str = typer.Argument(..., metavar="FAULT", help=_FAULT_HELP)) -> None:
    """Break a running host the way a real one breaks."""
    applied = _act(lambda lab: lab.fault(host, name), True)
    typer.echo(f"{host}: {applied.name} ({applied.effect}); the harness must call it env_fault/{applied.category}")


@lab_app.command("heal")
def heal(host: str = typer.Argument(...)) -> None:
    """Undo every fault of a running host."""
    _act(lambda lab: lab.heal(host), True)
    typer.echo(f"{host}: healed")


def _act(action, quiet: bool):
    from harness.lab.sim import LabError

    try:
        return action(open_lab("sim", quiet))
    except InputError as exc:
        raise fail_input(exc)
    except LabError as exc:
        typer.echo(f"lab sim: {exc}", err=True)
        raise typer.Exit(EXIT_ENV_FAULT)


def _print_status(status) -> None:
    if not status.hosts:
        typer.echo(f"lab {status.name}: down")
        return
    typer.echo(f"lab {status.name}: {'up' if status.up else 'partly down'}; inventory {status.inventory}")
    for host in status.hosts:
        services = " ".join(f"{name} {state}" for name, state in host.services.items())
        cards = " ".join(f"card{n} {state}" for n, state in host.cards.items())
        faults = ", ".join(host.faults) or "healthy"
        running = "; running: " + ", ".join(host.running) if host.running else ""
        typer.echo(f"  {host.name} [{host.state}] ssh {host.address or '-'}  {faults}  ({services} {cards}){running}")
    if status.slurm is not None:
        typer.echo(f"  slurm controller {status.name}-ctl: {status.slurm['controller']}")
        for node in status.slurm["nodes"]:
            reason = f"  reason: {node['reason']}" if node["reason"] else ""
            typer.echo(f"    {node['name']}: {node['state']}{reason}")
