"""The simulated Wormhole lab: STAND-IN hosts for a lab that has cards, on this machine's Docker.

Each host is a container (``sim-wh-01`` ...) that runs its own sshd with its own host key, its
own Docker engine, and a simulated card (``harness/lab/hostimage/tt-sim``): ``/dev/tenstorrent/N``
nodes, tt-kmd's sysfs and procfs entries, a firmware heartbeat, the 1G hugetlbfs mount and a
stand-in ``tt-smi``. The harness reaches a host only the way it reaches a real one: over SSH,
through the inventory :meth:`SimLab.up` writes (host keys pinned, no trust on first use), with the
same preflight, paths and ``docker run`` options. Only the lab's own controls (create, break,
heal, status) use this machine's Docker API.

Every container, network and volume of the lab carries the label ``harness.lab=<lab name>``, so
:meth:`SimLab.down` finds everything it made. Host containers need more than Docker's default
rights to run an engine inside (``--cap-add ALL --cap-drop SYS_RESOURCE``, no seccomp or
AppArmor profile, the cgroup tree bound read-write): the recipe that works where ``--privileged``
does not. SSH ports are published on 127.0.0.1 only.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import contextlib
import io
import os
import subprocess
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import docker
import docker.errors
import paramiko

from harness.core.atomic import write_text
from harness.execution import images
from harness.lab import DEFAULT_HOSTS, slurmlab
from harness.lab.faults import Fault, fault_named
from harness.lab.keys import known_hosts_line, public_line, write_ed25519_key

LAB_LABEL = "harness.lab"
HOST_IMAGE_DIR = Path(__file__).resolve().parent / "hostimage"
REPO = Path(__file__).resolve().parents[2]
DEBIAN_BASE = "tt-harness/debian:bookworm"
BUILD_BASE = REPO / "containers" / "base" / "build-base.sh"
LAB_DIR_ENV = "TT_HARNESS_LAB_DIR"
BOARD = "n150"
HOST_LABELS = ("n150", "nightly", "compiler", "sim")
USER = "ci"
READY_TIMEOUT = 120.0
ProgressCallback = Callable[[str], None]


class LabError(Exception):
    """The lab cannot do what was asked (Docker unreachable, a host that does not start...)."""


@dataclass(frozen=True)
class HostStatus:
    name: str
    state: str  # the container's: running, exited, ... or "missing"
    address: str | None = None  # 127.0.0.1:PORT for SSH
    faults: tuple[str, ...] = ()
    services: Mapping[str, str] = field(default_factory=dict)  # sshd/dockerd -> up | down
    cards: Mapping[int, str] = field(default_factory=dict)  # device number -> board state
    running: tuple[str, ...] = ()  # containers running on the host's engine

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "state": self.state,
            "address": self.address,
            "faults": list(self.faults),
            "services": dict(self.services),
            "cards": {str(n): state for n, state in self.cards.items()},
            "running": list(self.running),
        }


@dataclass(frozen=True)
class LabStatus:
    name: str
    hosts: tuple[HostStatus, ...]
    inventory: Path | None
    slurm: Mapping[str, object] | None = None  # with --slurm: controller state and nodes as Slurm sees them

    @property
    def up(self) -> bool:
        return bool(self.hosts) and all(h.state == "running" for h in self.hosts)

    def to_json(self) -> dict:
        out = {
            "lab": self.name,
            "up": self.up,
            "inventory": str(self.inventory) if self.inventory else None,
            "hosts": [h.to_json() for h in self.hosts],
        }
        if self.slurm is not None:
            out["slurm"] = dict(self.slurm)
        return out


def host_name(lab: str, number: int) -> str:
    return f"{lab}-wh-{number:02d}"


def default_lab_dir(lab: str) -> Path:
    """Where a lab keeps its keys and inventory: $TT_HARNESS_LAB_DIR, else the user's state dir."""
    if os.environ.get(LAB_DIR_ENV):
        return Path(os.environ[LAB_DIR_ENV]) / lab
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "tt-harness" / "lab" / lab


class SimLab:
    """One simulated lab on this machine's Docker engine."""

    def __init__(
        self,
        name: str = "sim",
        *,
        directory: Path | None = None,
        client: docker.DockerClient | None = None,
        on_progress: ProgressCallback | None = None,
    ):
        self.name = name
        self.directory = directory or default_lab_dir(name)
        self._client = client
        self.say = on_progress or (lambda line: None)

    # -- paths and names -----------------------------------------------------------------
    @property
    def inventory_path(self) -> Path:
        return self.directory / "inventory.yaml"

    @property
    def network(self) -> str:
        return f"tt-harness-lab-{self.name}"

    def container_name(self, host: str) -> str:
        return f"tt-harness-lab-{host}"

    def volume_name(self, host: str) -> str:
        return f"tt-harness-lab-{host}-docker"

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            self._client = _docker_client()
        return self._client

    # -- up --------------------------------------------------------------------------------
    def up(
        self, hosts: int = DEFAULT_HOSTS, faults: Mapping[str, Sequence[str]] | None = None, *, slurm: bool = False
    ) -> LabStatus:
        """Bring the lab up with ``hosts`` hosts (more are kept), building what is missing.

        Idempotent: hosts that run are left as they are; ``faults`` (host -> fault names) are put
        on new hosts before their sshd answers, and on running ones as asked. ``slurm``: the
        hosts also run slurmd + munged, and a controller ``<lab>-ctl`` (slurmctld, the shared
        results folder, the client tools: the login node) joins them (harness/lab/slurmlab.py).
        """
        faults = {host: tuple(fault_named(f).name for f in names) for host, names in (faults or {}).items()}
        wanted = [host_name(self.name, n) for n in range(1, hosts + 1)]
        unknown = sorted(set(faults) - set(wanted) - set(self._existing_hosts()))
        if unknown:
            raise LabError(f"no host {unknown[0]} in lab {self.name} (hosts: {', '.join(wanted)})")
        slurm = slurm or self.has_slurm()
        existing = [h for h in self._existing_hosts() if self._container(h) is not None]
        if slurm and existing and not self.has_slurm():
            raise LabError(f"lab {self.name} runs without Slurm; `harness lab down` first, then `harness lab up --slurm`")
        image = slurmlab.slurm_image(self) if slurm else self._host_image()
        self.directory.mkdir(parents=True, exist_ok=True)
        client_key = self._client_key()
        self._ensure_network()
        started = []
        if slurm:
            slurmlab.prepare(self, wanted, faults)
        for host in wanted:
            container = self._container(host)
            if container is None:
                self.say(f"lab {self.name}: creating {host}")
                self._create(host, image, client_key, faults.get(host, ()), slurm=slurm)
                started.append(host)
            else:
                if container.attrs.get("Image") != self.client.images.get(image).id:
                    self.say(f"lab {self.name}: {host} runs an older host image; `harness lab down` then up to renew it")
                if container.status != "running":
                    self.say(f"lab {self.name}: starting {host} ({container.status})")
                    container.start()
                    started.append(host)
        if slurm:
            started += slurmlab.ensure_controller(self, image, client_key)
        self._wait_ready(started)
        for host, names in faults.items():
            if host not in started:
                for name in names:
                    self.fault(host, name)
        status = self.status()
        self._write_inventory(status)
        return dataclasses.replace(status, inventory=self.inventory_path)

    def _host_image(self) -> str:
        self._ensure_base()
        return self.build_image("lab-host", HOST_IMAGE_DIR, DEBIAN_BASE, "host image")

    def build_image(self, name: str, folder: Path, base: str, what: str) -> str:
        """The lab image whose Dockerfile is in ``folder``, on ``base``: its tag, built once per
        content (a LabError naming ``what`` when it cannot be built)."""
        rendering = images.render_dockerfile(name, name, (folder / "Dockerfile").read_text(), (("BASE", base),), folder)
        if images.find_image(self.client, rendering.tag) is None:
            self.say(f"lab {self.name}: building the {what} {rendering.tag} (once)")
        try:
            return images.ensure_rendered(rendering, on_progress=self.say, client=self.client).tag
        except images.ImageError as exc:
            raise LabError(f"cannot build the lab's {what}: {exc}") from None

    def _ensure_base(self) -> None:
        if images.find_image(self.client, DEBIAN_BASE) is not None:
            return
        self.say(f"lab {self.name}: building the local base image {DEBIAN_BASE} with {BUILD_BASE.name} (a few minutes, once)")
        process = subprocess.Popen(
            [str(BUILD_BASE), "debian"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert process.stdout is not None
        for line in process.stdout:
            self.say(line.rstrip("\n"))
        if process.wait() != 0:
            raise LabError(f"{BUILD_BASE} debian failed (exit {process.returncode}); see the lines above")

    def _client_key(self) -> paramiko.Ed25519Key:
        return _key(self.directory / "id_ed25519", f"harness-lab-{self.name}")

    def _host_key_path(self, host: str) -> Path:
        return self.directory / "hostkeys" / f"{host}_ed25519"

    def _host_key(self, host: str) -> paramiko.Ed25519Key:
        return _key(self._host_key_path(host), host)

    def _ensure_network(self) -> None:
        if not self.client.networks.list(names=[self.network]):
            self.client.networks.create(self.network, driver="bridge", labels={LAB_LABEL: self.name})

    def _create(
        self, host: str, image: str, client_key: paramiko.Ed25519Key, faults: Sequence[str], *, slurm: bool = False
    ) -> None:
        volume = self.volume_name(host)
        if not self.client.volumes.list(filters={"name": volume}):
            self.client.volumes.create(volume, labels={LAB_LABEL: self.name})
        volumes = {"/sys/fs/cgroup": {"bind": "/sys/fs/cgroup", "mode": "rw"}, volume: {"bind": "/var/lib/docker", "mode": "rw"}}
        environment = {"TT_SIM_DEVICES": "0", "TT_SIM_CARD": BOARD, "TT_SIM_FAULTS": " ".join(faults)}
        labels = {LAB_LABEL: self.name, f"{LAB_LABEL}.host": host}
        if slurm:
            volumes.update(slurmlab.node_volumes(self))
            environment["TT_SIM_SLURM_ROLE"] = "node"
            labels[slurmlab.ROLE_LABEL] = "node"
        container = self.client.containers.create(
            image,
            name=self.container_name(host),
            hostname=host,
            labels=labels,
            environment=environment,
            network=self.network,
            ports={"22/tcp": ("127.0.0.1", None)},
            cap_add=["ALL"],
            cap_drop=["SYS_RESOURCE"],
            security_opt=["seccomp=unconfined", "apparmor=unconfined"],
            volumes=volumes,
            init=True,
            detach=True,
        )
        self.install_ssh_identity(container, host, client_key)
        container.start()

    def install_ssh_identity(self, container, host: str, client_key) -> None:
        """The host's pinned host key and the lab client's authorized key, into a created container."""
        self._host_key(host)
        container.put_archive("/etc/ssh", _tar({
            "lab_host_ed25519_key": (self._host_key_path(host).read_text(), 0o600),
            f"authorized_keys.d/{USER}": (f"{public_line(client_key)} harness-lab-{self.name}\n", 0o644),
        }))

    def _wait_ready(self, hosts: Sequence[str]) -> None:
        if not hosts:
            return
        self.say(f"lab {self.name}: waiting for {', '.join(hosts)} (card, dockerd, sshd)")
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(hosts)) as pool:
            for future in [pool.submit(self._wait_one, host) for host in hosts]:
                future.result()

    def _wait_one(self, host: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            container = self._container(host)
            if container is None or container.status not in ("running", "created"):
                logs = container.logs(tail=30).decode(errors="replace") if container is not None else ""
                raise LabError(f"{host} stopped while starting:\n{logs}")
            if container.exec_run(["test", "-e", "/run/tt-sim/ready"]).exit_code == 0:
                return
            time.sleep(0.3)
        raise LabError(f"{host} was not ready within {READY_TIMEOUT:.0f} s")

    def _write_inventory(self, status: LabStatus) -> None:
        keys = self.directory / "known_hosts"
        identity = self.directory / "id_ed25519"
        lines, entries = [], []
        controller = slurmlab.controller_address(self)
        if controller is not None:
            address, _, port = controller.rpartition(":")
            lines.append(known_hosts_line(f"[{address}]:{port}", self._host_key(slurmlab.controller_name(self))))
        for host in status.hosts:
            if host.address is None:
                continue
            address, _, port = host.address.rpartition(":")
            lines.append(known_hosts_line(f"[{address}]:{port}", self._host_key(host.name)))
            entries.append(
                f"  - name: {host.name}\n"
                f"    address: {address}\n"
                f"    port: {port}\n"
                f"    user: {USER}\n"
                f"    identity_file: {identity}\n"
                f"    known_hosts: {keys}\n"
                f"    host_key_policy: strict\n"
                f"    labels: [{', '.join(HOST_LABELS)}]\n"
                f"    boards:\n"
                f"      - {{type: {BOARD}, devices: [0]}}\n"
            )
        write_text(keys, "".join(lines))
        write_text(
            self.inventory_path,
            f"# The simulated lab {self.name!r}, written by `harness lab up`: STAND-IN Wormhole hosts (no\n"
            "# card anywhere: see harness/lab/sim.py). Reached like real hosts: SSH with pinned host keys.\n"
            "hosts:\n" + "".join(entries) + (slurmlab.inventory_section(self, controller, identity, keys) if controller else ""),
        )

    # -- faults -----------------------------------------------------------------------------
    def fault(self, host: str, name: str) -> Fault:
        """Put fault ``name`` on a running host."""
        fault = fault_named(name)
        self._exec(host, ["tt-sim", "fault", fault.name])
        return fault

    def heal(self, host: str) -> None:
        """Undo every fault of a running host."""
        self._exec(host, ["tt-sim", "heal"])

    def _exec(self, host: str, argv: Sequence[str]) -> str:
        container = self._container(host)
        if container is None or container.status != "running":
            raise LabError(f"{host} is not running in lab {self.name} (`harness lab up` first)")
        result = container.exec_run(list(argv))
        output = result.output.decode(errors="replace")
        if result.exit_code != 0:
            raise LabError(f"{host}: {' '.join(argv)} failed (exit {result.exit_code}): {output.strip()}")
        return output

    # -- status and down -------------------------------------------------------------------
    def status(self) -> LabStatus:
        hosts = []
        for container in self._containers():
            host = container.labels.get(f"{LAB_LABEL}.host", container.name)
            if container.labels.get(slurmlab.ROLE_LABEL) == "ctl":
                continue  # the Slurm controller: no card (LabStatus.slurm tells its state)
            if container.status != "running":
                hosts.append(HostStatus(host, container.status))
                continue
            ports = (container.attrs.get("NetworkSettings") or {}).get("Ports") or {}
            bound = (ports.get("22/tcp") or [{}])[0]
            address = f"{bound.get('HostIp', '127.0.0.1')}:{bound['HostPort']}" if bound.get("HostPort") else None
            command = "tt-sim status; lab-slurm status" if container.labels.get(slurmlab.ROLE_LABEL) else "tt-sim status"
            result = container.exec_run(["sh", "-c", command])
            hosts.append(_parse_status(host, address, result.output.decode(errors="replace")))
        hosts.sort(key=lambda h: h.name)
        return LabStatus(
            self.name, tuple(hosts), self.inventory_path if self.inventory_path.exists() else None,
            slurmlab.cluster_status(self),
        )

    def has_slurm(self) -> bool:
        """Whether this lab runs Slurm (its controller exists)."""
        return self._container(slurmlab.controller_name(self)) is not None

    def down(self) -> list[str]:
        """Remove every container, volume and network of the lab; what was removed."""
        removed = []
        for container in self._containers():
            container.remove(force=True, v=True)
            removed.append(f"container {container.name}")
        for volume in self.client.volumes.list(filters={"label": f"{LAB_LABEL}={self.name}"}):
            volume.remove(force=True)
            removed.append(f"volume {volume.name}")
        for network in self.client.networks.list(filters={"label": f"{LAB_LABEL}={self.name}"}):
            network.remove()
            removed.append(f"network {network.name}")
        for path in (self.inventory_path, self.directory / "known_hosts"):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        return removed

    def _containers(self) -> list:
        return self.client.containers.list(all=True, filters={"label": f"{LAB_LABEL}={self.name}"})

    def _existing_hosts(self) -> list[str]:
        return [c.labels.get(f"{LAB_LABEL}.host", c.name) for c in self._containers()]

    def _container(self, host: str):
        try:
            return self.client.containers.get(self.container_name(host))
        except docker.errors.NotFound:
            return None


def _parse_status(host: str, address: str | None, text: str) -> HostStatus:
    faults, services, cards, running = [], {}, {}, []
    for line in text.splitlines():
        parts = line.split("\t")
        if parts[0] == "fault" and len(parts) == 2:
            faults.append(parts[1])
        elif parts[0] == "service" and len(parts) == 3:
            services[parts[1]] = parts[2]
        elif parts[0] == "card" and len(parts) == 3 and parts[1].isdigit():
            cards[int(parts[1])] = parts[2]
        elif parts[0] == "container" and len(parts) >= 3:
            check = parts[4] if len(parts) > 4 and parts[4] else parts[1]
            running.append(f"{check} ({parts[3]})" if len(parts) > 3 else check)
    return HostStatus(host, "running", address, tuple(faults), services, cards, tuple(running))


def _docker_client() -> docker.DockerClient:
    try:
        return images.docker_client()
    except images.ImageError as exc:
        raise LabError(f"{exc.message}; the simulated lab runs on this machine's Docker engine") from None


def _key(path: Path, comment: str) -> paramiko.Ed25519Key:
    if path.exists():
        return paramiko.Ed25519Key.from_private_key_file(str(path))
    return write_ed25519_key(path, comment)


def _tar(files: Mapping[str, tuple[str, int]]) -> bytes:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        for name, (text, mode) in files.items():
            raw = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(raw), mode
            tar.addfile(info, io.BytesIO(raw))
    return data.getvalue()
