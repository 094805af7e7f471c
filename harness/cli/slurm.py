"""``harness slurm``: what a Slurm cluster needs from the harness (config lines, the health
check, the epilog). ``harness run JOB --slurm CLUSTER`` submits to it."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from harness.cli.app import app
from harness.cli.common import INVENTORY_ENV, LAB_OPTION_HELP, fail_input, resolve_inventory, usage_error
from harness.core.errors import InputError

slurm_app = typer.Typer(
    help="Slurm: config lines for an inventory's hosts, the HealthCheckProgram and the Epilog.",
    no_args_is_help=True,
)
app.add_typer(slurm_app, name="slurm")

PROBE_SCRIPT = 'for f in /dev/tenstorrent/*; do [ -c "$f" ] && printf "%s\\n" "${f##*/}"; done; exit 0'


@slurm_app.command("config")
def config(
    inventory: Optional[Path] = typer.Option(None, "--inventory", "-i", help=f"The lab inventory (default: ${INVENTORY_ENV}, else configs/local.yaml)."),
    lab_name: Optional[str] = typer.Option(None, "--lab", help=LAB_OPTION_HELP),
    cluster: Optional[str] = typer.Option(None, "--cluster", help="Only this `slurm:` cluster's nodes, with its partition names (default: every host with a board)."),
    probe: bool = typer.Option(True, "--probe/--no-probe", help="Ask each host over SSH which /dev/tenstorrent/N it has, and list only those (default). --no-probe trusts the inventory."),
    health_interval: int = typer.Option(60, "--health-interval", min=1, help="HealthCheckInterval, seconds."),
    prefix: str = typer.Option("/usr/local/sbin", "--prefix", help="Where the node wrappers tt-harness-healthcheck and tt-harness-epilog are installed."),
) -> None:
    """Print slurm.conf and gres.conf lines for the inventory's hosts: boards as GRES types,
    arch/board/labels as Features, one partition per board, the harness's health check and
    epilog. A device file a host lacks is never listed (slurmd would exit on it)."""
    from harness.core import slurm
    from harness.core.inventory import load_inventory
    from harness.core.profiles import default_boards

    try:
        inv = load_inventory(resolve_inventory(inventory, lab_name))
    except InputError as exc:
        raise fail_input(exc)
    partitions: dict[str, str] = {}
    hosts = [h for h in inv.hosts if h.boards]
    if cluster is not None:
        try:
            chosen = inv.cluster(cluster)
        except KeyError:
            raise usage_error(f"{inv.path}: no slurm cluster named {cluster!r} (clusters: {', '.join(c.name for c in inv.clusters) or 'none'})")
        partitions = dict(chosen.partitions)
        if chosen.nodes:
            hosts = [inv.host(name) for name in chosen.nodes]
    if not hosts:
        raise usage_error(f"{inv.path}: no host with a board to configure")
    present = _probe(inv, hosts) if probe else {}
    boards = default_boards()
    nodes, notes = [], []
    for host in hosts:
        if probe and isinstance(present.get(host.name), str):
            notes.append(f"# {host.name}: not listed: {present[host.name]}")
            continue
        have = present.get(host.name)
        cards: dict[str, tuple[int, ...]] = {}
        missing = []
        for board in host.boards:
            for device in board.devices:
                if have is None or device in have:
                    cards.setdefault(board.type, ())
                    cards[board.type] += (device,)
                else:
                    missing.append(device)
        arch = {boards[b.type].arch for b in host.boards if b.type in boards and getattr(boards[b.type], "arch", None)}
        features = (*sorted(arch), *host.board_types(), *host.labels)
        nodes.append(slurm.NodeLines(host.name, cards, features, missing=tuple(missing)))
    conf, gres = slurm.config_lines(
        nodes, partitions, healthcheck=f"{prefix}/tt-harness-healthcheck", epilog=f"{prefix}/tt-harness-epilog",
        health_interval=health_interval,
    )
    typer.echo("# --- slurm.conf (add to the cluster's; MUNGE, SlurmctldHost etc. as the cluster has them) ---")
    for line in (*notes, *conf):
        typer.echo(line)
    typer.echo("# --- gres.conf ---")
    for line in gres:
        typer.echo(line)
    typer.echo(f"# --- on every node: {prefix}/tt-harness-healthcheck and {prefix}/tt-harness-epilog, each a wrapper that")
    typer.echo("#     runs `harness slurm healthcheck` / `harness slurm epilog` (Slurm passes no arguments) ---")


def _probe(inv, hosts) -> dict[str, object]:
    """Host -> the device numbers it shows, or why it could not be asked."""
    from concurrent.futures import ThreadPoolExecutor

    from harness.execution.connect import Connections
    from harness.execution.transport import TransportError

    out: dict[str, object] = {}
    with Connections(inv) as connections:
        def one(host):
            try:
                result = connections.transport(host).run(["sh", "-c", PROBE_SCRIPT], timeout=60)
                if result.exit_status != 0:
                    return host.name, f"probe failed (exit {result.exit_status}): {result.stderr_tail.strip()[-200:]}"
                return host.name, {int(n) for n in result.stdout_tail.split() if n.isdigit()}
            except TransportError as exc:
                return host.name, f"unreachable ({exc.message})"
            except ValueError as exc:  # a jump loop
                return host.name, str(exc)

        with ThreadPoolExecutor(max_workers=min(16, len(hosts))) as pool:
            out.update(pool.map(one, hosts))
    return out


@slurm_app.command("healthcheck")
def healthcheck(
    node: Optional[str] = typer.Option(None, "--node", help="This node's Slurm name (default: $SLURMD_NODENAME, else the short host name)."),
    gres_conf: Path = typer.Option(Path("/etc/slurm/gres.conf"), "--gres-conf", help="Where this node's cards are listed."),
) -> None:
    """HealthCheckProgram: the preflight on this node. A fault drains it with a reason starting
    `\\[tt-harness]`; once it passes again, a node the harness drained is resumed (never one
    drained by someone else). Exit 0 (Slurm ignores the status; the reason says it all)."""
    from harness.execution.slurmnode import healthcheck as run_healthcheck

    raise typer.Exit(run_healthcheck(node, str(gres_conf), say=typer.echo))


@slurm_app.command("epilog")
def epilog(
    job: Optional[str] = typer.Option(None, "--job", help="The Slurm job id (default: $SLURM_JOB_ID)."),
) -> None:
    """Epilog: kill and remove the job's containers (label slurm.job=<id>), which `scancel`
    leaves running. Always exit 0: a failing Epilog would drain the node."""
    from harness.execution.slurmnode import epilog as run_epilog

    raise typer.Exit(run_epilog(job, say=typer.echo))
