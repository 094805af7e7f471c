"""Boards and device profiles: what a card needs, and the container options that give it.

Both catalogs are data in ``configs/`` (boards.yaml, profiles.yaml). A profile renders to the
exact ``docker run`` options a check gets; :func:`lint` says, with the reason, where a
profile falls short of what a board needs. The seed bug report is the reason this exists:
a mis-mounted container made a real kernel bug look like flakiness.
"""

from __future__ import annotations

import functools
import posixpath
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from harness.core.configs import config_path
from harness.core.errors import InputError
from harness.core.yamlnodes import Fields, Node, load_file

HUGEPAGES_1G = "/dev/hugepages-1G"
TT_DEVICE_DIR = "/dev/tenstorrent"


@dataclass(frozen=True)
class Board:
    name: str
    arch: str
    chips: int
    mmio_devices: int  # /dev/tenstorrent/N nodes the host shows for one such board
    hugepages_min: int
    hugepages_recommended: int


@dataclass(frozen=True)
class Mount:
    source: str
    target: str
    optional: bool = False  # mounted only where the host has the source
    readonly: bool = False

    def option(self) -> str:
        return f"{self.source}:{self.target}" + (":ro" if self.readonly else "")


@dataclass(frozen=True)
class Profile:
    name: str
    description: str = ""
    devices: tuple[str, ...] = ()
    mounts: tuple[Mount, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    network: str | None = None
    ipc: str | None = None
    cap_add: tuple[str, ...] = ()
    privileged: bool = False
    shm_size: str | None = None

    def docker_run_options(
        self,
        home: str | None,
        has_path: Callable[[str], bool] | None = None,
        leased: Sequence[int] | None = None,
    ) -> list[str]:
        """The profile's ``docker run`` options. ``has_path`` answers whether the host has a
        path; optional mounts whose source it lacks are dropped (``None``: keep them all).
        ``leased``: the cards this container may use; it gets only their nodes, never the
        whole ``/dev/tenstorrent`` (``None``: the profile's devices as written)."""
        options: list[str] = []
        if self.privileged:
            options.append("--privileged")
        for device in self.devices:
            if leased is not None and posixpath.normpath(device) == TT_DEVICE_DIR:
                for n in leased:
                    options += ["--device", f"{TT_DEVICE_DIR}/{n}"]
            else:
                options += ["--device", device]
        for mount in self.mounts:
            if mount.optional and has_path is not None and not has_path(mount.source):
                continue
            options += ["-v", mount.option()]
        if self.network:
            options.append(f"--network={self.network}")
        if self.ipc:
            options.append(f"--ipc={self.ipc}")
        for cap in self.cap_add:
            options += ["--cap-add", cap]
        if self.shm_size:
            options.append(f"--shm-size={self.shm_size}")
        for key, value in self.env.items():
            if "{home}" in value and home is None:
                continue  # e.g. TT_METAL_HOME for a ttnn wheel image, which carries its own libraries
            options += ["-e", f"{key}={value.replace('{home}', home or '')}"]
        return options

    @property
    def cardless(self) -> bool:
        """A profile that gives the container nothing of the card (like ``none``): its checks
        need no card, so they get no card probe and are not blocked by card faults."""
        return not (self.devices or self.mounts or self.privileged)

    def covers(self, path: str) -> bool:
        """Whether the container sees the host's ``path`` (bound itself or under a bound parent)."""
        return any(_within(path, mount.target) and mount.source == mount.target for mount in self.mounts)

    def passes_device(self, path: str) -> bool:
        return self.privileged or any(_within(path, device) for device in self.devices)


def _within(path: str, parent: str) -> bool:
    path, parent = posixpath.normpath(path), posixpath.normpath(parent)
    return path == parent or path.startswith(parent.rstrip("/") + "/")


# ---------------------------------------------------------------------------------------------
# What a profile lacks for a board: warnings with their reasons


def lint(profile: Profile, board: Board, shared: bool = False) -> list[str]:
    """Warnings for a profile used with a board; empty when nothing is missing."""
    warnings = []
    if not profile.passes_device("/dev/tenstorrent/0"):
        warnings.append(
            f"profile {profile.name!r} does not pass the card (--device /dev/tenstorrent): the container "
            "cannot open /dev/tenstorrent/N and tt-metal stops with 'No chips detected in the cluster'"
        )
    if not profile.covers(HUGEPAGES_1G):
        warnings.append(
            f"profile {profile.name!r} does not mount {HUGEPAGES_1G}: UMD finds host memory by looking for a "
            f"hugetlbfs at exactly {HUGEPAGES_1G} in /proc/mounts (tt-umd device/hugepage.cpp), so without it "
            f"the {board.name}'s {board.hugepages_min} host-memory channel(s) are missing and runs fail "
            "('Broadcasts not available without system memory'); only hosts with IOMMU on can do without"
        )
    if not profile.covers("/sys") and not profile.privileged:
        warnings.append(
            f"profile {profile.name!r} does not bind /sys: the container gets Docker's own read-only sysfs, "
            "so device resets and driver attributes written from inside it fail; the LayerNorm-bw seed report "
            "traced its 'flaky' runs to a container without -v /dev:/dev -v /sys:/sys"
        )
    if shared and profile.ipc != "host":
        warnings.append(
            f"profile {profile.name!r} shares the card between containers without --ipc=host: UMD's "
            "cross-process device locks are POSIX shared-memory mutexes (TT_UMD_LOCK.*), invisible across "
            "private IPC namespaces, so two containers on one card do not lock each other out"
        )
    return warnings


# Host paths whose bind gives a container the host itself: the root, its configuration and
# secrets, the Docker socket (root on the host), the kernel's and the boot files.
_SENSITIVE_SOURCES = ("/", "/etc", "/root", "/home", "/var/run/docker.sock", "/run/docker.sock", "/proc", "/boot", "/var/lib/docker")
# Capabilities a card needs: SYS_NICE lets UMD bind hugepages to the card's NUMA node (tt-metal#22173).
_NEEDED_CAPS = frozenset({"SYS_NICE"})


def widening(profile: Profile) -> list[str]:
    """Warnings for every option that gives a container more than a card needs."""
    warnings = []
    if profile.privileged:
        warnings.append(
            f"profile {profile.name!r} is privileged: the container gets every device and capability of the "
            "host; `harness run` refuses it on hosts whose inventory does not say allow_privileged: true"
        )
    for mount in profile.mounts:
        if posixpath.normpath(mount.source) in _SENSITIVE_SOURCES and not mount.readonly:
            warnings.append(f"profile {profile.name!r} binds the host's {mount.source} writable: more than a card needs")
        elif posixpath.normpath(mount.source) == "/":
            warnings.append(f"profile {profile.name!r} binds the host's / : more than a card needs")
    for cap in profile.cap_add:
        if cap.upper().removeprefix("CAP_") not in _NEEDED_CAPS:
            warnings.append(f"profile {profile.name!r} adds capability {cap}: more than a card needs")
    return warnings


# ---------------------------------------------------------------------------------------------
# Loading the catalogs


@functools.lru_cache(maxsize=None)
def default_boards() -> Mapping[str, Board]:
    return load_boards(str(config_path("boards.yaml")))


@functools.lru_cache(maxsize=None)
def default_profiles() -> Mapping[str, Profile]:
    return load_profiles(str(config_path("profiles.yaml")))


def load_boards(path: str) -> Mapping[str, Board]:
    root = Fields(load_file(path), "board catalog", required=("boards",))
    boards = {}
    for name, node in root.req("boards").as_map("boards").items():
        f = Fields(
            node,
            f"board {name}",
            required=("arch", "chips", "mmio_devices", "hugepages_min", "hugepages_recommended"),
        )
        boards[name] = Board(
            name=name,
            arch=f.req("arch").as_str("arch"),
            chips=f.req("chips").as_int("chips", minimum=1),
            mmio_devices=f.req("mmio_devices").as_int("mmio_devices", minimum=1),
            hugepages_min=f.req("hugepages_min").as_int("hugepages_min", minimum=0),
            hugepages_recommended=f.req("hugepages_recommended").as_int("hugepages_recommended", minimum=0),
        )
    return boards


def load_profiles(path: str) -> Mapping[str, Profile]:
    root = Fields(load_file(path), "profile catalog", required=("profiles",))
    profiles = {}
    problems = []
    for name, node in root.req("profiles").as_map("profiles").items():
        try:
            profiles[name] = parse_profile(node, name)
        except InputError as exc:
            problems.extend(exc.problems)
    if problems:
        raise InputError(problems)
    return profiles


def parse_profile(node: Node, name: str | None) -> Profile:
    """A profile mapping from a catalog (``name`` given) or inline in a job spec (``name`` key)."""
    keys = ("description", "devices", "mounts", "env", "network", "ipc", "cap_add", "privileged", "shm_size")
    f = Fields(node, "profile", required=() if name else ("name",), optional=keys)
    if name is None:
        name = f.req("name").as_str("profile name")

    def text(key: str) -> str | None:
        return f.opt(key).as_str(f"profile.{key}") if f.has(key) else None

    env = {}
    if f.has("env"):
        for key, value in f.req("env").as_map("profile.env").items():
            env[key] = value.as_str(f"profile.env.{key}")
    return Profile(
        name=name,
        description=" ".join((text("description") or "").split()),
        devices=f.opt("devices").as_str_list("profile.devices") if f.has("devices") else (),
        mounts=tuple(_mount(m) for m in f.opt("mounts").as_list("profile.mounts")) if f.has("mounts") else (),
        env=env,
        network=text("network"),
        ipc=text("ipc"),
        cap_add=f.opt("cap_add").as_str_list("profile.cap_add") if f.has("cap_add") else (),
        privileged=f.opt("privileged").as_bool("profile.privileged") if f.has("privileged") else False,
        shm_size=text("shm_size"),
    )


def _mount(node: Node) -> Mount:
    """``src:dst[:ro]`` or ``{source, target, optional, readonly}``."""
    if isinstance(node.value, str):
        parts = node.value.split(":")
        if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] not in ("ro", "rw")):
            raise node.fail(f"mount {node.value!r} must be SOURCE:TARGET or SOURCE:TARGET:ro")
        mount = Mount(parts[0], parts[1], readonly=len(parts) == 3 and parts[2] == "ro")
    else:
        f = Fields(node, "mount", required=("source", "target"), optional=("optional", "readonly"))
        mount = Mount(
            source=f.req("source").as_str("mount source"),
            target=f.req("target").as_str("mount target"),
            optional=f.opt("optional").as_bool("optional") if f.has("optional") else False,
            readonly=f.opt("readonly").as_bool("readonly") if f.has("readonly") else False,
        )
    for path in (mount.source, mount.target):
        if not path.startswith("/"):
            raise node.fail(f"mount paths must be absolute, got {path!r}")
    return mount
