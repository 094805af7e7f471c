"""Inventories: the lab's hosts, how to reach them, and which boards they carry."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import InputError
from harness.core.profiles import default_boards
from harness.core.slurm import SlurmCluster
from harness.core.yamlnodes import Fields, Node, did_you_mean, load_file, parse_named

TRANSPORTS = ("ssh", "local")
HOST_KEY_POLICIES = ("strict", "accept-new")
_HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
_HOSTNAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?")  # DNS names and IPv4; IPv6 below


@dataclass(frozen=True)
class BoardSlot:
    """One board in a host, with the /dev/tenstorrent/N numbers it shows."""

    type: str
    devices: tuple[int, ...]


@dataclass(frozen=True)
class Registry:
    url: str
    username: str | None = None
    password: str | None = None  # always a ${ENV_VAR} reference, resolved at use time


@dataclass(frozen=True)
class Host:
    name: str
    transport: str = "ssh"
    address: str | None = None
    port: int = 22
    user: str | None = None
    identity_file: str | None = None
    known_hosts: str | None = None  # None: ~/.ssh/known_hosts
    host_key_policy: str = "strict"
    labels: tuple[str, ...] = ()
    boards: tuple[BoardSlot, ...] = ()
    docker: str | None = None  # the engine endpoint on the host; None: the host's default
    jump: str | None = None  # name of another host in the inventory
    registry: Registry | None = None
    # Resets the cards a hung check used ({devices}: their numbers, comma-separated), before the
    # smoke check and the rerun of hang triage. tt-smi 6.x takes `-r 0,1`.
    reset: tuple[str, ...] = ("tt-smi", "-r", "{devices}")
    allow_privileged: bool = False  # whether a job may run --privileged containers here

    @property
    def device_ids(self) -> tuple[int, ...]:
        return tuple(device for board in self.boards for device in board.devices)

    def board_types(self) -> tuple[str, ...]:
        return tuple(board.type for board in self.boards)


@dataclass(frozen=True)
class Inventory:
    path: Path
    hosts: tuple[Host, ...]
    clusters: tuple[SlurmCluster, ...] = ()  # `slurm:` clusters to submit to (harness run --slurm)

    def cluster(self, name: str) -> SlurmCluster:
        for cluster in self.clusters:
            if cluster.name == name:
                return cluster
        raise KeyError(name)

    def host(self, name: str) -> Host:
        for host in self.hosts:
            if host.name == name:
                return host
        raise KeyError(name)

    def select(self, labels: tuple[str, ...] = (), names: tuple[str, ...] = ()) -> tuple[Host, ...]:
        """Hosts carrying every label; restricted to ``names`` when given."""
        chosen = [h for h in self.hosts if set(labels) <= set(h.labels)]
        if names:
            chosen = [h for h in chosen if h.name in names]
        return tuple(chosen)


def load_inventory(path: str | Path) -> Inventory:
    root = load_file(path)
    f = Fields(root, "inventory", required=("hosts",), optional=("slurm",))
    hosts, nodes, problems = parse_named(f.req("hosts").as_list("hosts"), _host, lambda h: h.name, "host name")
    clusters: list[SlurmCluster] = []
    if f.has("slurm"):
        clusters, cluster_nodes, more = parse_named(f.req("slurm").as_list("slurm"), _cluster, lambda c: c.name, "cluster name")
        problems.extend(more)
        for cluster in clusters:
            node = cluster_nodes[cluster.name]
            for name in cluster.nodes:
                if name not in nodes:
                    problems.append(node.problem(f"slurm cluster {cluster.name!r}: node {name!r} is not a host of this inventory{did_you_mean(name, tuple(nodes))}"))
    names = tuple(nodes)
    for host in hosts:
        if host.jump is not None:
            jump_node = nodes[host.name].value["jump"]
            if host.jump not in nodes:
                problems.append(jump_node.problem(f"jump host {host.jump!r} is not in this inventory{did_you_mean(host.jump, names)}"))
            elif host.jump == host.name:
                problems.append(jump_node.problem("a host cannot be its own jump host"))
    if problems:
        raise InputError(problems)
    return Inventory(path=Path(path), hosts=tuple(hosts), clusters=tuple(clusters))


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        return False


def _host(node: Node) -> Host:
    f = Fields(
        node,
        "host",
        required=("name",),
        optional=(
            "transport", "address", "port", "user", "identity_file", "known_hosts", "host_key_policy",
            "labels", "boards", "docker", "jump", "registry", "reset", "allow_privileged",
        ),
    )
    name = f.req("name").as_str("host name")
    if not _HOST_NAME.fullmatch(name):
        # Host names become folders under --out and parts of container names: no paths.
        raise f.req("name").fail(
            f"host name {name!r} must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    transport = f.opt("transport").as_choice("transport", TRANSPORTS) if f.has("transport") else "ssh"
    address = None
    if transport == "ssh":
        if not f.has("address"):
            raise node.fail(f"ssh host {name!r} needs an `address`")
        address = f.req("address").as_str("address")
        if not (_HOSTNAME.fullmatch(address) or _is_ip(address)):
            raise f.req("address").fail(f"address {address!r} is not a host name or IP address")
    elif any(f.has(k) for k in ("address", "user", "identity_file", "jump", "known_hosts")):
        raise node.fail(f"host {name!r} uses the local transport: address, user, identity_file, known_hosts and jump do not apply")

    def text(key: str) -> str | None:
        return f.opt(key).as_str(key) if f.has(key) else None

    reset = f.opt("reset").as_str_list("reset") if f.has("reset") else Host.reset
    if not reset:
        raise f.req("reset").fail("reset is an argv like [tt-smi, -r, '{devices}']; it is empty")
    port = f.opt("port").as_int("port", minimum=1) if f.has("port") else 22
    if port > 65535:
        raise f.req("port").fail("port must be at most 65535")
    return Host(
        name=name,
        transport=transport,
        address=address,
        port=port,
        user=text("user"),
        identity_file=text("identity_file"),
        known_hosts=text("known_hosts"),
        host_key_policy=f.opt("host_key_policy").as_choice("host_key_policy", HOST_KEY_POLICIES)
        if f.has("host_key_policy")
        else "strict",
        reset=tuple(reset),
        allow_privileged=f.opt("allow_privileged").as_bool("allow_privileged") if f.has("allow_privileged") else False,
        labels=f.opt("labels").as_str_list("labels") if f.has("labels") else (),
        boards=tuple(_board(b) for b in f.opt("boards").as_list("boards")) if f.has("boards") else (),
        docker=text("docker"),
        jump=text("jump"),
        registry=_registry(f.opt("registry")) if f.has("registry") else None,
    )


def _cluster(node: Node) -> SlurmCluster:
    f = Fields(node, "slurm cluster", required=("name", "login", "shared_dir"), optional=("partitions", "nodes", "node_command"))
    name = f.req("name").as_str("cluster name")
    login = _host(f.req("login"))
    if login.transport != "ssh":
        raise f.req("login").fail("the login node is reached over SSH: give its address")
    shared = f.req("shared_dir").as_str("shared_dir")
    if not shared.startswith("/") or any(c in shared for c in "\0\n"):
        raise f.req("shared_dir").fail(f"shared_dir {shared!r} must be an absolute path every node sees alike")
    partitions = {}
    if f.has("partitions"):
        for board, value in f.req("partitions").as_map("partitions").items():
            partitions[board] = value.as_str(f"partition for {board}")
    command = f.opt("node_command").as_str_list("node_command") if f.has("node_command") else SlurmCluster.node_command
    if not command:
        raise f.req("node_command").fail("node_command is an argv, e.g. [tt-harness-node]; it is empty")
    return SlurmCluster(
        name=name, login=login, shared_dir=shared.rstrip("/") or "/", partitions=partitions,
        nodes=f.opt("nodes").as_str_list("nodes") if f.has("nodes") else (), node_command=tuple(command),
    )


def _board(node: Node) -> BoardSlot:
    f = Fields(node, "board", required=("type", "devices"))
    boards = default_boards()
    kind = f.req("type").as_str("board type")
    if kind not in boards:
        raise f.req("type").fail(f"unknown board type {kind!r}{did_you_mean(kind, tuple(boards))}; known: {', '.join(boards)}")
    devices_node = f.req("devices")
    devices = tuple(d.as_int("device id", minimum=0) for d in devices_node.as_list("devices"))
    expected = boards[kind].mmio_devices
    if len(devices) != expected:
        raise devices_node.fail(
            f"a {kind} shows {expected} /dev/tenstorrent node(s) to the host; {len(devices)} device id(s) given"
        )
    return BoardSlot(type=kind, devices=devices)


def _registry(node: Node) -> Registry:
    f = Fields(node, "registry", required=("url",), optional=("username", "password"))
    return Registry(
        url=f.req("url").as_str("registry url"),
        username=f.opt("username").as_str("registry username") if f.has("username") else None,
        password=f.opt("password").as_secret_ref("registry password") if f.has("password") else None,
    )
