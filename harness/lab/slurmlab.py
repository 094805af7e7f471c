"""Slurm in the simulated lab (``harness lab up --slurm``): STAND-IN cluster, real Slurm.

The lab's hosts run Debian 12's slurmd and munged beside their simulated card; a controller host
``<lab>-ctl`` runs slurmctld and munged, holds the shared folder (``/srv/slurm``, a Docker volume
every lab host mounts alike: results and job inputs) and the client tools, and is reached over
SSH like the hosts: it is the cluster's login node. The config is rendered by
:mod:`harness.core.slurm` (the same lines ``harness slurm config`` prints for a real cluster),
with the harness's health check and epilog, and it lists only the device files each host has.

PID 1 in a lab host is not systemd: ``lab-slurm init`` (harness/lab/slurmimage) starts munged
and the Slurm daemon directly once the lab has written the config and the shared MUNGE key.
"""

from __future__ import annotations

import io
import secrets
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from harness.core import slurm
from harness.core.atomic import write_bytes

if TYPE_CHECKING:  # sim imports this module
    import paramiko

    from harness.lab.sim import SimLab

ROLE_LABEL = "harness.lab.slurm"  # ctl | node
SLURM_IMAGE_DIR = Path(__file__).resolve().parent / "slurmimage"
REPO = Path(__file__).resolve().parents[2]
SHARED = "/srv/slurm"
RESULTS = f"{SHARED}/results"
HARNESS_ON_NODES = "/opt/tt-harness"
HEALTHCHECK = "/usr/local/sbin/tt-harness-healthcheck"
EPILOG = "/usr/local/sbin/tt-harness-epilog"
NODE_COMMAND = "/usr/local/sbin/tt-harness-node"  # by path: a job's PATH is the submitter's
HEALTH_INTERVAL = 10  # seconds: a fault drains its host within a few of them
NO_CARD_FAULTS = frozenset({"no-device", "no-driver"})  # the host has no device file


def controller_name(lab: SimLab) -> str:
    return f"{lab.name}-ctl"


def shared_volume(lab: SimLab) -> str:
    return f"tt-harness-lab-{lab.name}-slurm"


def slurm_image(lab: SimLab) -> str:
    """The Slurm host image, built once on top of the lab's host image."""
    return lab.build_image("lab-slurm", SLURM_IMAGE_DIR, lab._host_image(), "Slurm host image")


def node_volumes(lab: SimLab) -> dict:
    """The shared folder, and the harness (read-only) for the node-side commands."""
    return {
        shared_volume(lab): {"bind": SHARED, "mode": "rw"},
        str(REPO): {"bind": HARNESS_ON_NODES, "mode": "ro"},
    }


def prepare(lab: SimLab, wanted: Sequence[str], faults: Mapping[str, Sequence[str]]) -> None:
    """The shared volume, and the cluster's config in it, before any host starts."""
    from harness.lab.sim import LAB_LABEL

    volume = shared_volume(lab)
    if not lab.client.volumes.list(filters={"name": volume}):
        lab.client.volumes.create(volume, labels={LAB_LABEL: lab.name})
    hosts = sorted(set(wanted) | {h for h in lab._existing_hosts() if h != controller_name(lab)})
    lab._slurm_config = render_config(lab, hosts, faults)


def render_config(lab: SimLab, hosts: Sequence[str], faults: Mapping[str, Sequence[str]]) -> tuple[str, str]:
    from harness.lab.sim import BOARD, HOST_LABELS

    nodes = []
    for host in hosts:
        # A host created with its card gone has no device file: list none, or slurmd exits.
        has = not (set(faults.get(host, ())) & NO_CARD_FAULTS)
        nodes.append(slurm.NodeLines(
            host, {BOARD: (0,) if has else ()}, ("wormhole_b0", BOARD, *HOST_LABELS),
            address=lab.container_name(host), missing=() if has else (0,),
        ))
    conf, gres = slurm.config_lines(
        nodes, {BOARD: slurm.default_partition(BOARD)}, healthcheck=HEALTHCHECK, epilog=EPILOG,
        health_interval=HEALTH_INTERVAL,
    )
    ctl = controller_name(lab)
    header = [
        f"# The simulated lab {lab.name!r}: a STAND-IN cluster (no card), written by `harness lab up --slurm`.",
        f"ClusterName={lab.name}",
        f"SlurmctldHost={ctl}({lab.container_name(ctl)})",
        "AuthType=auth/munge",
        "SlurmUser=root",
        "SlurmdUser=root",
        "StateSaveLocation=/var/spool/slurmctld",
        "SlurmdSpoolDir=/var/spool/slurmd",
        "SlurmctldPidFile=/run/slurmctld.pid",
        "SlurmdPidFile=/run/slurmd.pid",
        "SlurmctldLogFile=/var/log/slurm/slurmctld.log",
        "SlurmdLogFile=/var/log/slurm/slurmd.log",
        # No systemd, no cgroup v1 delegation in a container: processes tracked by their parents.
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "SchedulerType=sched/backfill",
        "MpiDefault=none",
        "ReturnToService=2",
        "SlurmdParameters=config_overrides",
        "MinJobAge=600",  # no slurmdbd: `scontrol show job` must answer after a job ends
        "KillWait=5",
        "SlurmdTimeout=30",
    ]
    return "\n".join(header + conf) + "\n", "\n".join(gres) + "\n"


def ensure_controller(lab: SimLab, image: str, client_key: paramiko.Ed25519Key) -> list[str]:
    """Create and start ``<lab>-ctl`` if missing; write the config and key into the shared
    folder (the hosts wait for them). The hosts to wait for: the controller, if it started."""
    from harness.lab.sim import LAB_LABEL, USER

    ctl = controller_name(lab)
    started = []
    container = lab._container(ctl)
    if container is None:
        lab.say(f"lab {lab.name}: creating {ctl} (slurmctld, munged, the login node)")
        container = lab.client.containers.create(
            image,
            name=lab.container_name(ctl),
            hostname=ctl,
            labels={LAB_LABEL: lab.name, f"{LAB_LABEL}.host": ctl, ROLE_LABEL: "ctl"},
            environment={"TT_SIM_SLURM_ROLE": "ctl"},
            network=lab.network,
            ports={"22/tcp": ("127.0.0.1", None)},
            volumes=node_volumes(lab),
            init=True,
            detach=True,
        )
        lab.install_ssh_identity(container, ctl, client_key)
        container.start()
        started.append(ctl)
    elif container.status != "running":
        container.start()
        started.append(ctl)
    conf, gres = getattr(lab, "_slurm_config", (None, None))
    if conf is not None:
        container.exec_run(["mkdir", "-p", f"{SHARED}/etc"])
        container.put_archive(f"{SHARED}/etc", _tar_bytes({
            "slurm.conf": (conf.encode(), 0o644),
            "gres.conf": (gres.encode(), 0o644),
            "munge.key": (_munge_key(lab), 0o400),
        }))
        # Results are written by the jobs, which run as the submitting user.
        container.exec_run(["install", "-d", "-o", USER, "-g", USER, "-m", "0755", RESULTS])
    return started


def _munge_key(lab: SimLab) -> bytes:
    path = lab.directory / "munge.key"
    if not path.exists():
        write_bytes(path, secrets.token_bytes(1024))
        path.chmod(0o600)
    return path.read_bytes()


def _tar_bytes(files: Mapping[str, tuple[bytes, int]]) -> bytes:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        for name, (raw, mode) in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(raw), mode
            tar.addfile(info, io.BytesIO(raw))
    return data.getvalue()


def controller_address(lab: SimLab) -> str | None:
    container = lab._container(controller_name(lab))
    if container is None or container.status != "running":
        return None
    container.reload()
    ports = (container.attrs.get("NetworkSettings") or {}).get("Ports") or {}
    bound = (ports.get("22/tcp") or [{}])[0]
    return f"{bound.get('HostIp', '127.0.0.1')}:{bound['HostPort']}" if bound.get("HostPort") else None


def inventory_section(lab: SimLab, controller: str, identity: Path, keys: Path) -> str:
    from harness.lab.sim import BOARD, USER

    address, _, port = controller.rpartition(":")
    return (
        "# The lab's Slurm cluster: submit on its login node, results in the shared folder.\n"
        "slurm:\n"
        f"  - name: {lab.name}\n"
        f"    login:\n"
        f"      name: {controller_name(lab)}\n"
        f"      address: {address}\n"
        f"      port: {port}\n"
        f"      user: {USER}\n"
        f"      identity_file: {identity}\n"
        f"      known_hosts: {keys}\n"
        f"      host_key_policy: strict\n"
        f"    shared_dir: {RESULTS}\n"
        f"    partitions: {{{BOARD}: {slurm.default_partition(BOARD)}}}\n"
        f"    node_command: [{NODE_COMMAND}]\n"
    )


def cluster_status(lab: SimLab) -> dict | None:
    """The controller's state and each node as Slurm sees it (state, reason), or None."""
    container = lab._container(controller_name(lab))
    if container is None:
        return None
    if container.status != "running":
        return {"controller": container.status, "nodes": []}
    result = container.exec_run(["sinfo", "-N", "-h", "-o", "%N|%T|%E"])
    nodes = []
    for line in result.output.decode(errors="replace").splitlines():
        parts = line.split("|", 2)
        if len(parts) == 3:
            nodes.append({"name": parts[0], "state": parts[1], "reason": "" if parts[2] == "none" else parts[2]})
    return {"controller": "running" if result.exit_code == 0 else "slurmctld not answering", "nodes": nodes}
