"""Host facts for preflight: parse what the gather script printed, then judge it.

Everything here is pure: no transport, no files but the threshold catalog. The gather script
(``harness.execution.preflight``) prints marked sections; :func:`parse_gather` turns them
into a frozen :class:`HostFacts`; :func:`evaluate` turns facts plus the inventory's boards
into :class:`PreflightCheck` results; a :class:`PreflightReport` holds them and gives the
``env_fault`` verdict every check planned on a failing host becomes.

Thresholds (KMD and firmware minimums, card type names, free disk) are data in
``configs/preflight.yaml``, each with its source.
"""

from __future__ import annotations

import enum
import functools
import json
import re
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from harness.core.configs import config_path
from harness.core.errors import InputError
from harness.core.inventory import BoardSlot
from harness.core.outcomes import EnvCategory, Evidence, Verdict
from harness.core.profiles import HUGEPAGES_1G, Board
from harness.core.yamlnodes import Fields, did_you_mean, load_file

KMD_VERSION = "/sys/module/tenstorrent/version"
HUGEPAGES_1G_SYSFS = "/sys/kernel/mm/hugepages/hugepages-1048576kB"
GIB = 1024**3

# The checks that matter to a check without a card (a compiler pipeline): reaching the host
# ("connect", "gather"), its Docker engine and its disk.
CARDLESS_CHECKS = frozenset({"connect", "gather", "docker", "disk"})
# The check names, in the order they are reported; the first fault decides the category.
CHECKS = (
    "kmd", "device-nodes", "card-type", "firmware", "heartbeat", "device-busy",
    "hugepages", "tt-smi", "docker", "disk",
)


class CheckStatus(str, enum.Enum):
    OK = "ok"
    WARN = "warn"
    FAULT = "fault"
    SKIP = "skip"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class PreflightCheck:
    name: str
    status: CheckStatus
    reason: str
    category: EnvCategory | None = None

    def __post_init__(self) -> None:
        if (self.status is CheckStatus.FAULT) != (self.category is not None):
            raise ValueError("a fault, and only a fault, carries an EnvCategory")

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "status": self.status.value,
            "reason": self.reason,
            "category": self.category.value if self.category else None,
        }


def ok(name: str, reason: str) -> PreflightCheck:
    return PreflightCheck(name, CheckStatus.OK, reason)


def warn(name: str, reason: str) -> PreflightCheck:
    return PreflightCheck(name, CheckStatus.WARN, reason)


def skip(name: str, reason: str) -> PreflightCheck:
    return PreflightCheck(name, CheckStatus.SKIP, reason)


def fault(name: str, category: EnvCategory, reason: str) -> PreflightCheck:
    return PreflightCheck(name, CheckStatus.FAULT, reason, category)


# ---------------------------------------------------------------------------------------------
# Facts


@dataclass(frozen=True)
class Reading:
    """One file read on the host: ``ok`` with its text, ``missing``, or ``unreadable`` with
    the error the read gave (a sysfs attribute of a hung card fails to read)."""

    state: str
    text: str = ""

    @property
    def value(self) -> str | None:
        return self.text.strip() if self.state == "ok" else None


MISSING = Reading("missing")


@dataclass(frozen=True)
class DeviceFacts:
    """One declared ``/dev/tenstorrent/N`` and its ``/sys/class/tenstorrent/tenstorrent!N``."""

    id: int
    node: str  # char | other | missing
    sysfs: bool  # the class folder exists
    card_type: Reading = MISSING
    fw_bundle: Reading = MISSING
    heartbeat: Reading = MISSING
    heartbeat_again: Reading = MISSING  # read again after the delay
    bdf: str | None = None  # PCI address, from the class folder's `device` link
    iommu_type: Reading = MISSING  # /sys/bus/pci/devices/<BDF>/iommu_group/type
    pids: Reading = MISSING  # /proc/driver/tenstorrent/N/pids
    processes: tuple[tuple[int, str], ...] = ()  # (pid, comm) of each pid listed

    @property
    def iommu(self) -> bool | None:
        """IOMMU translating DMA for this card (type ``DMA`` or ``DMA-FQ``); ``None``: unknown."""
        if self.bdf is None:
            return None
        value = self.iommu_type.value
        return value is not None and value.startswith("DMA")


@dataclass(frozen=True)
class SmiBoard:
    """One chip as ``tt-smi -s`` lists it."""

    board_type: str
    bus_id: str
    fw_bundle: str


@dataclass(frozen=True)
class TtSmiFacts:
    state: str  # skipped (not asked for) | absent (not installed) | ran
    exit_status: int | None = None
    output: str = ""  # stdout, colour codes removed
    stderr: str = ""
    snapshot_parsed: bool = False
    boards: tuple[SmiBoard, ...] = ()


@dataclass(frozen=True)
class CommandFacts:
    """A command the gather ran; ``exit_status`` is ``None`` when it did not run."""

    exit_status: int | None
    output: str = ""
    stderr: str = ""


@dataclass(frozen=True)
class HostFacts:
    """What the gather script saw on one host.

    ``root`` is ``/`` on a real host; anything else is a stand-in host tree (tests and the
    simulated lab), and every path below is read under it.
    """

    root: str
    kmd_version: Reading
    dev_dir: bool  # /dev/tenstorrent exists
    dev_entries: tuple[tuple[str, str], ...]  # (name, char|dir|other) under /dev/tenstorrent
    devices: tuple[DeviceFacts, ...]  # the declared ones, in declaration order
    hugetlbfs: tuple[tuple[str, str], ...] | None  # (mount point, options); None: no /proc/mounts
    hugepages_nr: Reading
    hugepages_free: Reading
    probes: tuple[tuple[str, bool], ...]  # (path, exists) for each path asked about
    heartbeat_delay: float  # seconds between the two tt_heartbeat reads
    tt_smi: TtSmiFacts
    docker: CommandFacts
    df: CommandFacts

    @property
    def iommu(self) -> bool | None:
        """IOMMU on for every declared card whose PCI address is known; ``None``: no such card."""
        known = [d.iommu for d in self.devices if d.iommu is not None]
        return all(known) if known else None

    def has_path(self, path: str) -> bool:
        """Whether the host has ``path``; only paths given to the gather were probed."""
        for probed, exists in self.probes:
            if probed == path:
                return exists
        raise KeyError(f"{path} was not probed on this host; pass it to preflight(probe_paths=...)")

    def device(self, device_id: int) -> DeviceFacts:
        for device in self.devices:
            if device.id == device_id:
                return device
        raise KeyError(device_id)

    @property
    def node_numbers(self) -> tuple[int, ...]:
        """Numbers of the numeric entries under /dev/tenstorrent (by-id links are not cards)."""
        return tuple(sorted(int(name) for name, _ in self.dev_entries if name.isdigit()))

    @property
    def docker_version(self) -> str | None:
        return self.docker.output.strip().split("|", 1)[0] if self.docker.exit_status == 0 else None

    @property
    def docker_root_dir(self) -> str | None:
        if self.docker.exit_status != 0 or "|" not in self.docker.output:
            return None
        return self.docker.output.strip().split("|", 1)[1]

    @property
    def disk_free_bytes(self) -> int | None:
        """Available bytes on Docker's root dir, from ``df -Pk`` (None: not measured)."""
        if self.df.exit_status != 0:
            return None
        lines = [line for line in self.df.output.splitlines() if line.strip()]
        if len(lines) < 2:
            return None
        fields = lines[-1].split()
        # POSIX df -P: filesystem, 1024-blocks, used, available, capacity, mount point.
        if len(fields) < 6 or not fields[3].isdigit():
            return None
        return int(fields[3]) * 1024


class GatherError(Exception):
    """The gather output is incomplete: the script did not run to its end."""


def parse_gather(
    output: str,
    nonce: str,
    *,
    root: str,
    device_ids: Sequence[int],
    probe_paths: Sequence[str],
    heartbeat_delay: float,
) -> HostFacts:
    """Parse the gather script's output (see ``harness.execution.preflight``).

    A section starts with a line ``@@NONCE@@ KEY STATE`` and runs to the next one; the
    per-run nonce means no file content can fake a section.
    """
    sections = _sections(output, nonce)

    def reading(key: str) -> Reading:
        if key not in sections:
            return MISSING
        state, lines = sections[key]
        return Reading(state, "\n".join(lines))

    def command(key: str) -> CommandFacts:
        if key not in sections or not sections[key][0].startswith("rc="):
            return CommandFacts(None)
        state, lines = sections[key]
        return CommandFacts(_int(state[3:]), "\n".join(lines), reading(f"{key}.err").text)

    devices = []
    for n in device_ids:
        node = reading(f"dev.{n}.node").value or "missing"
        pids = reading(f"pids.{n}")
        processes = tuple(
            (pid, reading(f"comm.{pid}").value or "?") for pid in _pids(pids.value or "")
        )
        devices.append(
            DeviceFacts(
                id=n,
                node=node,
                sysfs=reading(f"sys.{n}").state == "ok",
                card_type=reading(f"sys.{n}.tt_card_type"),
                fw_bundle=reading(f"sys.{n}.tt_fw_bundle_ver"),
                heartbeat=reading(f"sys.{n}.tt_heartbeat"),
                heartbeat_again=reading(f"sys.{n}.tt_heartbeat.2"),
                bdf=reading(f"pci.{n}.bdf").value or None,
                iommu_type=reading(f"pci.{n}.iommu_type"),
                pids=pids,
                processes=processes,
            )
        )

    nodes = reading("dev.nodes")
    entries = tuple(
        (parts[1], parts[0]) for parts in (line.split(" ", 1) for line in nodes.text.splitlines()) if len(parts) == 2
    )
    mounts = reading("mounts.hugetlbfs")
    hugetlbfs = None
    if mounts.state == "ok":
        hugetlbfs = tuple(
            (parts[0], parts[1] if len(parts) > 1 else "")
            for parts in (line.split(" ", 1) for line in mounts.text.splitlines() if line.strip())
        )
    probes = tuple((path, reading(f"probe.{i}").state == "present") for i, path in enumerate(probe_paths))
    return HostFacts(
        root=root,
        kmd_version=reading("kmd.version"),
        dev_dir=nodes.state == "ok",
        dev_entries=entries,
        devices=tuple(devices),
        hugetlbfs=hugetlbfs,
        hugepages_nr=reading("hugepages.nr"),
        hugepages_free=reading("hugepages.free"),
        probes=probes,
        heartbeat_delay=heartbeat_delay,
        tt_smi=_tt_smi(sections),
        docker=command("docker"),
        df=command("df"),
    )


def _sections(output: str, nonce: str) -> dict[str, tuple[str, list[str]]]:
    mark = f"@@{nonce}@@ "
    sections: dict[str, tuple[str, list[str]]] = {}
    current: list[str] | None = None
    ended = False
    for line in output.splitlines():
        if line.startswith(mark):
            head = line[len(mark):].split(" ", 1)
            if head == ["end"]:
                ended = True
                current = None
                continue
            current = []
            sections[head[0]] = (head[1] if len(head) > 1 else "", current)
        elif current is not None:
            current.append(line)
    if not ended:
        raise GatherError("the gather script's output stops before its end mark")
    return sections


def _int(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.lstrip("-").isdigit() else None


def _pids(text: str) -> tuple[int, ...]:
    """PIDs in a ``/proc/driver/tenstorrent/N/pids`` file: the first field of each line."""
    pids = []
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0].isdigit():
            pids.append(int(fields[0]))
    return tuple(pids)


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _tt_smi(sections: Mapping[str, tuple[str, list[str]]]) -> TtSmiFacts:
    if "tt-smi" not in sections:
        return TtSmiFacts("skipped")
    state, lines = sections["tt-smi"]
    if state in ("skipped", "absent"):
        return TtSmiFacts(state)
    output = _ANSI.sub("", "\n".join(lines))
    stderr = _ANSI.sub("", "\n".join(sections.get("tt-smi.err", ("", []))[1]))
    snapshot = parse_snapshot(output)
    return TtSmiFacts(
        state="ran",
        exit_status=_int(state[3:]) if state.startswith("rc=") else None,
        output=output,
        stderr=stderr,
        snapshot_parsed=snapshot is not None,
        boards=_smi_boards(snapshot) if snapshot is not None else (),
    )


def parse_snapshot(text: str) -> dict | None:
    """The JSON object of a ``tt-smi -s`` snapshot: tt-smi may print progress or log lines
    first (ttmetal.md §3.3), and a log line may itself hold a ``{``, so parsing starts at
    the first ``{`` that opens a line and decodes to an object."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"^[ \t]*\{", text, re.MULTILINE):
        try:
            obj, _ = decoder.raw_decode(text, match.end() - 1)
        except ValueError:
            continue
        if isinstance(obj, dict):
            return obj
    return None


def _smi_boards(snapshot: Mapping) -> tuple[SmiBoard, ...]:
    devices = snapshot.get("device_info")
    boards = []
    for device in devices if isinstance(devices, list) else []:
        if not isinstance(device, dict):
            continue
        info = device.get("board_info") if isinstance(device.get("board_info"), dict) else {}
        firmwares = device.get("firmwares") if isinstance(device.get("firmwares"), dict) else {}
        boards.append(
            SmiBoard(
                board_type=str(info.get("board_type", "N/A")),
                bus_id=str(info.get("bus_id", "N/A")),
                fw_bundle=str(firmwares.get("fw_bundle_version", "N/A")),
            )
        )
    return tuple(boards)


# ---------------------------------------------------------------------------------------------
# Thresholds


@dataclass(frozen=True)
class PreflightConfig:
    kmd_minimum: str
    firmware_minimum: Mapping[str, str]  # arch -> oldest firmware bundle
    card_types: Mapping[str, tuple[str, ...]]  # board -> names tt_card_type may print
    disk_min_bytes: int
    heartbeat_delay: float
    tt_smi_timeout: int
    docker_timeout: int


def load_preflight_config(path: str, boards: Mapping[str, Board]) -> PreflightConfig:
    keys = (
        "kmd_minimum", "firmware_minimum", "card_types", "disk_min_gib", "heartbeat_delay_s",
        "tt_smi_timeout_s", "docker_timeout_s",
    )
    f = Fields(load_file(path), "preflight config", required=keys)

    def version(node, what: str) -> str:
        text = node.as_str(what)
        if parse_version(text) is None:
            raise node.fail(f"{what} must be a version like 2.0.0, got {text!r}")
        return text

    arches = sorted({board.arch for board in boards.values()})
    firmware = {}
    for arch, node in f.req("firmware_minimum").as_map("firmware_minimum").items():
        if arch not in arches:
            raise InputError(
                [node.key_problem(f"unknown arch {arch!r}{did_you_mean(arch, arches)}; known: {', '.join(arches)}")]
            )
        firmware[arch] = version(node, f"firmware_minimum.{arch}")
    if missing := [arch for arch in arches if arch not in firmware]:
        raise f.req("firmware_minimum").fail(f"firmware_minimum has no entry for {', '.join(missing)}")
    card_types = {}
    for name, node in f.req("card_types").as_map("card_types").items():
        if name not in boards:
            raise InputError([node.key_problem(f"unknown board {name!r}{did_you_mean(name, tuple(boards))}")])
        card_types[name] = node.as_str_list(f"card_types.{name}")
    delay_node = f.req("heartbeat_delay_s")
    delay = delay_node.value
    if isinstance(delay, bool) or not isinstance(delay, (int, float)) or not 0 < delay <= 60:
        raise delay_node.fail("heartbeat_delay_s must be a number of seconds between 0 and 60")
    return PreflightConfig(
        kmd_minimum=version(f.req("kmd_minimum"), "kmd_minimum"),
        firmware_minimum=firmware,
        card_types=card_types,
        disk_min_bytes=f.req("disk_min_gib").as_int("disk_min_gib", minimum=0) * GIB,
        heartbeat_delay=float(delay),
        tt_smi_timeout=f.req("tt_smi_timeout_s").as_int("tt_smi_timeout_s", minimum=1),
        docker_timeout=f.req("docker_timeout_s").as_int("docker_timeout_s", minimum=1),
    )


@functools.lru_cache(maxsize=None)
def default_preflight_config() -> PreflightConfig:
    from harness.core.profiles import default_boards

    return load_preflight_config(str(config_path("preflight.yaml")), default_boards())


_VERSION = re.compile(r"^\s*v?(\d+(?:\.\d+)*)")


def parse_version(text: str) -> tuple[int, ...] | None:
    """``2.3.0`` -> (2, 3, 0); suffixes like ``-rc1`` are ignored; ``None`` if no number leads."""
    match = _VERSION.match(text)
    return tuple(int(part) for part in match.group(1).split(".")) if match else None


def version_below(version: tuple[int, ...], minimum: tuple[int, ...]) -> bool:
    width = max(len(version), len(minimum))
    return version + (0,) * (width - len(version)) < minimum + (0,) * (width - len(minimum))


# ---------------------------------------------------------------------------------------------
# Judging the facts


def evaluate(
    facts: HostFacts, slots: Sequence[BoardSlot], boards: Mapping[str, Board], config: PreflightConfig
) -> tuple[PreflightCheck, ...]:
    """One check per name in :data:`CHECKS`, judged against the boards the inventory declares."""
    declared = {device: boards[slot.type] for slot in slots for device in slot.devices}
    slot_boards = [boards[slot.type] for slot in slots]
    return (
        _kmd(facts, declared, config),
        _device_nodes(facts, declared),
        _per_device("card-type", facts, declared, lambda d, b: _card_type(d, b, config), own_sysfs=True),
        _per_device("firmware", facts, declared, lambda d, b: _firmware(d, b, config)),
        _per_device("heartbeat", facts, declared, lambda d, b: _heartbeat(d, facts.heartbeat_delay)),
        _per_device("device-busy", facts, declared, lambda d, b: _busy(d)),
        _hugepages(facts, slot_boards),
        _tt_smi_check(facts, slot_boards),
        _docker(facts, config),
        _disk(facts, config),
    )


def _kmd(facts: HostFacts, declared: Mapping[int, Board], config: PreflightConfig) -> PreflightCheck:
    if not declared:
        return skip("kmd", "no boards declared for this host")
    reading = facts.kmd_version
    if reading.state == "missing":
        return fault(
            "kmd", EnvCategory.DRIVER_MISSING,
            f"no Tenstorrent driver loaded: {KMD_VERSION} does not exist; install tt-kmd and load it (modprobe tenstorrent)",
        )
    if reading.state != "ok":
        return fault("kmd", EnvCategory.SYSFS, f"cannot read {KMD_VERSION}: {reading.text.strip()}")
    version = parse_version(reading.value or "")
    if version is None:
        return fault("kmd", EnvCategory.DRIVER_VERSION, f"cannot tell the tt-kmd version from {KMD_VERSION}: {reading.value!r}")
    minimum = config.kmd_minimum
    if version_below(version, parse_version(minimum) or ()):
        return fault(
            "kmd", EnvCategory.DRIVER_VERSION,
            f"tt-kmd {reading.value} is older than {minimum}, the oldest tt-umd runs with (KMD_MINIMUM_VERSION); upgrade tt-kmd",
        )
    return ok("kmd", f"tt-kmd {reading.value}")


def _device_nodes(facts: HostFacts, declared: Mapping[int, Board]) -> PreflightCheck:
    if not declared:
        return skip("device-nodes", "no boards declared for this host")
    wanted = ", ".join(f"/dev/tenstorrent/{n} ({board.name})" for n, board in declared.items())
    if not facts.dev_dir:
        return fault(
            "device-nodes", EnvCategory.DEVICE_MISSING,
            f"/dev/tenstorrent does not exist: no card is visible (the inventory declares {wanted}); "
            "check the card is seated and tt-kmd is loaded",
        )
    problems = []
    for device in facts.devices:
        name = f"/dev/tenstorrent/{device.id} ({declared[device.id].name})"
        if device.node == "missing":
            problems.append(f"{name} is missing")
        elif device.node != "char":
            problems.append(f"{name} is not a character device")
    if problems:
        return fault("device-nodes", EnvCategory.DEVICE_MISSING, "; ".join(problems))
    extra = [n for n in facts.node_numbers if n not in declared]
    if extra:
        listed = ", ".join(f"/dev/tenstorrent/{n}" for n in extra)
        return warn("device-nodes", f"{wanted} present; also {listed}, not in the inventory")
    return ok("device-nodes", f"{wanted} present")


# A per-device judgement: (status, text, category for a fault).
_Judged = tuple[CheckStatus, str, EnvCategory | None]


def _per_device(
    name: str,
    facts: HostFacts,
    declared: Mapping[int, Board],
    judge: Callable[[DeviceFacts, Board], _Judged],
    own_sysfs: bool = False,
) -> PreflightCheck:
    """Judge each declared card; the check is the worst of them, naming the cards that made it.

    A card without its sysfs folder is a fault once, in the check that ``own_sysfs``; where
    its node is missing too, device-nodes has already said so.
    """
    if not declared:
        return skip(name, "no boards declared for this host")
    results: list[tuple[int, _Judged]] = []
    for device in facts.devices:
        folder = f"/sys/class/tenstorrent/tenstorrent!{device.id}"
        if not device.sysfs and device.node != "missing" and own_sysfs:
            results.append(
                (device.id, (CheckStatus.FAULT, f"{folder} is missing although the device node exists", EnvCategory.SYSFS))
            )
        elif not device.sysfs:
            results.append((device.id, (CheckStatus.SKIP, f"no {folder}", None)))
        else:
            results.append((device.id, judge(device, declared[device.id])))
    for status in (CheckStatus.FAULT, CheckStatus.WARN, CheckStatus.OK):
        chosen = [(n, judged) for n, judged in results if judged[0] is status]
        if chosen:
            reason = "; ".join(f"device {n}: {text}" for n, (_, text, _) in chosen)
            category = chosen[0][1][2] if status is CheckStatus.FAULT else None
            return PreflightCheck(name, status, reason, category)
    reasons = dict.fromkeys(text for _, (_, text, _) in results)  # unique, in order
    return skip(name, "; ".join(reasons))


def _unavailable(reading: Reading, what: str) -> _Judged | None:
    """A driver attribute this tt-kmd lacks is skipped; one it fails to read is a sysfs fault."""
    if reading.state == "missing":
        return CheckStatus.SKIP, f"this tt-kmd does not expose {what}", None
    if reading.state != "ok":
        return CheckStatus.FAULT, f"cannot read {what}: {reading.text.strip()}", EnvCategory.SYSFS
    return None


def _card_type(device: DeviceFacts, board: Board, config: PreflightConfig) -> _Judged:
    reading = device.card_type
    if unavailable := _unavailable(reading, "tt_card_type"):
        return unavailable
    expected = config.card_types.get(board.name)
    if expected is None:
        return CheckStatus.SKIP, f"no tt_card_type name known for a {board.name} (configs/preflight.yaml)", None
    if reading.value == "unknown":
        return CheckStatus.WARN, f"tt-kmd reports card type 'unknown' (expected {' or '.join(expected)})", None
    if reading.value not in expected:
        return (
            CheckStatus.FAULT,
            f"the card is a {reading.value}, the inventory declares a {board.name} (tt_card_type {' or '.join(expected)})",
            EnvCategory.DEVICE_MISSING,
        )
    return CheckStatus.OK, reading.value or "", None


def _firmware(device: DeviceFacts, board: Board, config: PreflightConfig) -> _Judged:
    reading = device.fw_bundle
    if unavailable := _unavailable(reading, "tt_fw_bundle_ver"):
        return unavailable
    version = parse_version(reading.value or "")
    minimum = config.firmware_minimum[board.arch]
    if version is None:
        return CheckStatus.FAULT, f"cannot tell the firmware bundle version from {reading.value!r}", EnvCategory.FIRMWARE
    if version_below(version, parse_version(minimum) or ()):
        return (
            CheckStatus.FAULT,
            f"firmware bundle {reading.value} is older than {minimum}, the oldest tt-umd supports on {board.arch}; "
            "update it with tt-flash",
            EnvCategory.FIRMWARE,
        )
    return CheckStatus.OK, f"firmware bundle {reading.value}", None


def _heartbeat(device: DeviceFacts, delay: float) -> _Judged:
    first, again = device.heartbeat, device.heartbeat_again
    reset = f"reset it on the host with `tt-smi -r /dev/tenstorrent/{device.id}`"
    if first.state == "missing":
        return CheckStatus.SKIP, "this tt-kmd does not expose tt_heartbeat", None
    for reading in (first, again):
        if reading.state != "ok":
            return (
                CheckStatus.FAULT,
                f"cannot read tt_heartbeat ({reading.text.strip() or reading.state}): the card's firmware does not answer; {reset}",
                EnvCategory.DEVICE_HANG,
            )
    if first.value == again.value:
        return (
            CheckStatus.FAULT,
            f"firmware heartbeat stuck at {first.value} over {delay:g} s: the card is hung; {reset}",
            EnvCategory.DEVICE_HANG,
        )
    return CheckStatus.OK, "heartbeat advancing", None


def _busy(device: DeviceFacts) -> _Judged:
    path = f"/proc/driver/tenstorrent/{device.id}/pids"
    if unavailable := _unavailable(device.pids, path):
        return unavailable
    if device.processes:
        users = ", ".join(f"PID {pid} ({comm})" for pid, comm in device.processes)
        return (
            CheckStatus.FAULT,
            f"in use by {users} ({path}); stop them or wait: a stale process from an earlier run often holds the card",
            EnvCategory.DEVICE_BUSY,
        )
    return CheckStatus.OK, "not in use", None


def _hugepages(facts: HostFacts, slot_boards: Sequence[Board]) -> PreflightCheck:
    name = "hugepages"
    if not slot_boards:
        return skip(name, "no boards declared for this host")
    if facts.iommu:
        return ok(name, "IOMMU on (DMA translation for every card): hugepages not required")
    need = sum(board.hugepages_min for board in slot_boards)
    recommended = sum(board.hugepages_recommended for board in slot_boards)
    what = " + ".join(board.name for board in slot_boards)
    if facts.hugetlbfs is None:
        return fault(name, EnvCategory.HUGEPAGES, "cannot read /proc/mounts")
    mounts = [options for point, options in facts.hugetlbfs if point == HUGEPAGES_1G]
    if not mounts:
        return fault(
            name, EnvCategory.HUGEPAGES,
            f"no hugetlbfs mounted at {HUGEPAGES_1G} (/proc/mounts): UMD looks for exactly that mount; "
            "install tt-system-tools (dev-hugepages\\x2d1G.mount) or mount it with pagesize=1G",
        )
    if not any(re.search(r"(^|,)pagesize=(1024M|1G)(,|$)", options) for options in mounts):
        return fault(name, EnvCategory.HUGEPAGES, f"{HUGEPAGES_1G} is mounted without pagesize=1G ({mounts[0]})")
    counts = {}
    for label, reading in (("nr_hugepages", facts.hugepages_nr), ("free_hugepages", facts.hugepages_free)):
        value = _int(reading.value or "") if reading.state == "ok" else None
        if value is None:
            detail = "missing: the kernel has no 1G hugepage support" if reading.state == "missing" else reading.text.strip()
            return fault(name, EnvCategory.HUGEPAGES, f"{HUGEPAGES_1G_SYSFS}/{label}: {detail}")
        counts[label] = value
    reserved, free = counts["nr_hugepages"], counts["free_hugepages"]
    if reserved < need:
        return fault(
            name, EnvCategory.HUGEPAGES,
            f"{reserved} 1G hugepage(s) reserved, {what} needs at least {need} (tt-system-tools reserves {recommended})",
        )
    if free < need:
        return fault(
            name, EnvCategory.HUGEPAGES,
            f"only {free} of {reserved} 1G hugepages free, {what} needs {need}: another process holds the rest",
        )
    if reserved < recommended:
        return warn(name, f"{reserved} 1G hugepage(s) reserved ({free} free): enough for {what}, below the {recommended} tt-system-tools reserves")
    return ok(name, f"{reserved} 1G hugepages reserved, {free} free, {HUGEPAGES_1G} mounted")


# tt-smi's fatal messages (ttmetal.md §3.3, packages.md); the first match wins, and a bar0
# mapping failure can sit inside "Error in detecting devices!", so it comes first.
_TT_SMI_ERRORS = (
    (
        "Failed to map bar0",
        EnvCategory.DEVICE_HANG,
        "the card is wedged beyond `tt-smi -r`: reload the tenstorrent module or reboot the host",
    ),
    # tt-umd's ARC messenger gave up inside device detection: the board does not answer.
    (
        "for ARC to respond",
        EnvCategory.DEVICE_HANG,
        "the card's ARC firmware does not answer: reset it with `tt-smi -r` on the host",
    ),
    ("No Tenstorrent driver detected", EnvCategory.DRIVER_MISSING, "tt-smi finds no tt-kmd"),
    ("No Tenstorrent devices detected", EnvCategory.DEVICE_MISSING, "tt-smi finds no card"),
    # the cards are there (else "No Tenstorrent devices detected") but did not come up; the
    # signature catalog's smi-detect-error says the same
    ("Error in detecting devices", EnvCategory.DEVICE_HANG, "tt-smi sees the cards but cannot bring them up: reset them with `tt-smi -r`"),
)
TIMEOUT_EXIT = 124  # what timeout(1) exits with when it stopped the command


def _tt_smi_check(facts: HostFacts, slot_boards: Sequence[Board]) -> PreflightCheck:
    name = "tt-smi"
    smi = facts.tt_smi
    if not slot_boards:
        return skip(name, "no boards declared for this host")
    if smi.state == "skipped":
        return skip(name, "not asked for")
    if smi.state == "absent":
        return skip(name, "tt-smi is not installed on the host")
    text = f"{smi.output}\n{smi.stderr}"
    if smi.exit_status != 0:
        for needle, category, meaning in _TT_SMI_ERRORS:
            if needle in text:
                line = next(line.strip() for line in text.splitlines() if needle in line)
                return fault(name, category, f"{meaning}: {line!r}")
        if smi.exit_status == TIMEOUT_EXIT:
            return fault(
                name, EnvCategory.DEVICE_HANG,
                "`tt-smi -s` did not finish in time: a card is likely hung; reset with `tt-smi -r` on the host",
            )
        return warn(name, f"`tt-smi -s` failed (exit {smi.exit_status}): {_last_line(text)}")
    if not smi.snapshot_parsed:
        return warn(name, f"`tt-smi -s` printed no JSON snapshot: {_last_line(text)}")
    chips = ", ".join(f"{b.board_type} (fw {b.fw_bundle})" for b in smi.boards) or "no chips"
    expected = sum(board.chips for board in slot_boards)
    if len(smi.boards) < expected:
        return warn(
            name,
            f"tt-smi sees {len(smi.boards)} chip(s), the declared boards have {expected}: a remote chip "
            f"(n300 R, T3000) may be unreachable over Ethernet; tt-smi lists {chips}",
        )
    return ok(name, f"snapshot: {chips}")


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def _docker(facts: HostFacts, config: PreflightConfig) -> PreflightCheck:
    result = facts.docker
    text = f"{result.output}\n{result.stderr}"
    if result.exit_status == 0 and facts.docker_root_dir:
        return ok("docker", f"engine {facts.docker_version}, root {facts.docker_root_dir}")
    if result.exit_status == 127:
        return fault("docker", EnvCategory.DOCKER, "the docker CLI is not installed on the host")
    if result.exit_status == TIMEOUT_EXIT:
        return fault("docker", EnvCategory.DOCKER, f"`docker info` did not answer in {config.docker_timeout} s: the engine is hung")
    return fault("docker", EnvCategory.DOCKER, f"the Docker engine is not reachable: {_last_line(text)}")


def _disk(facts: HostFacts, config: PreflightConfig) -> PreflightCheck:
    root = facts.docker_root_dir
    if facts.docker.exit_status != 0 or not root:
        return skip("disk", "the Docker engine is not reachable")
    free = facts.disk_free_bytes
    if free is None:
        return warn("disk", f"cannot measure free space under {root}: {_last_line(facts.df.output + chr(10) + facts.df.stderr)}")
    need = config.disk_min_bytes
    shown = f"{free / GIB:.1f} GiB free under {root}"
    if free < need:
        return fault("disk", EnvCategory.DISK, f"only {shown}; images need at least {need / GIB:g} GiB")
    return ok("disk", shown)


# ---------------------------------------------------------------------------------------------
# The report


@dataclass(frozen=True)
class PreflightReport:
    """Preflight of one host. ``facts`` is ``None`` when the host could not be asked at all."""

    host: str
    checks: tuple[PreflightCheck, ...]
    facts: HostFacts | None = None

    @property
    def faults(self) -> tuple[PreflightCheck, ...]:
        return tuple(check for check in self.checks if check.status is CheckStatus.FAULT)

    @property
    def ok(self) -> bool:
        """No fault; warnings and skips still pass."""
        return not self.faults

    def blocking(self, needs_card: bool = True) -> tuple[PreflightCheck, ...]:
        """The faults that keep a check from running here: all of them for a check that uses
        the card, only the host's own (connection, Docker, disk) for one that does not."""
        return tuple(c for c in self.faults if needs_card or c.name in CARDLESS_CHECKS)

    def verdict(self, needs_card: bool = True) -> Verdict:
        """The ``env_fault`` a check blocked on this host becomes: the first blocking fault's
        category, a message naming every blocking fault, and one evidence line for each.
        Only for a check that is blocked (``report.blocking(needs_card)`` is not empty)."""
        faults = self.blocking(needs_card)
        if not faults:
            raise ValueError(f"host {self.host} passed preflight: there is no fault verdict")
        message = f"host {self.host} failed preflight: " + "; ".join(f"{c.name}: {c.reason}" for c in faults)
        evidence = [
            Evidence(line=None, text=f"preflight {c.name} [{c.category}]: {c.reason}", signature=f"preflight:{c.name}")
            for c in faults
        ]
        category = faults[0].category
        assert category is not None  # PreflightCheck guarantees it for a fault
        return Verdict.env_fault(category, message, evidence)

    def to_json(self) -> dict:
        return {"host": self.host, "ok": self.ok, "checks": [check.to_json() for check in self.checks]}
