"""The simulated lab's STAND-IN tt-smi (harness/lab/hostimage/tt-smi), run as the lab runs it.

Each test lays out a stand-in card tree under tmp_path (what `tt-sim` lays out on a lab host:
tt-kmd's version file, /dev/tenstorrent/N, the class folder's attributes, the simulation's own
tt_sim_state, /proc/driver/tenstorrent/N/pids) and runs the script with this interpreter and
TT_SIM_ROOT pointing at the tree. Device nodes are regular files here (no mknod needed); the
script accepts those only under TT_SIM_ROOT. The messages asserted are the real tools' own
(tenstorrent/tt-smi 6.2.1 tt_smi/tt_smi.py, tt-tools-common chip_reset.py, tt-umd v0.9.8
wormhole_arc_messenger.cpp); the script's header says which is which.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import re
import shlex
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.core.hostfacts import CheckStatus, SmiBoard, _smi_boards, parse_snapshot
from harness.core.inventory import BoardSlot, Host
from harness.core.outcomes import EnvCategory
from harness.execution.preflight import preflight
from harness.execution.transport import LocalTransport

from tests.hosttree import Card, beating, build_host, heartbeat_path

TT_SMI = Path(__file__).resolve().parents[1] / "harness/lab/hostimage/tt-smi"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
HUNG_BOUND = 5.0  # seconds a hung card may take to be reported

ARC_TIMEOUT = "Timed out after waiting 1000 ms for ARC to respond. Message code 0xaa57 with arguments 0x0 and 0x0"
NO_DRIVER = "No Tenstorrent driver detected! Please install driver using tt-kmd: https://github.com/tenstorrent/tt-kmd"
NO_DEVICES = "No Tenstorrent devices detected! Please check your hardware and try again. Exiting..."

HEALTHY = {
    "tt_card_type": "n150",
    "tt_fw_bundle_ver": "18.5.0",
    "tt_heartbeat": "1234",
    "tt_serial": "1000000000",
    "tt_asic_id": "0x0000005a1000",
    "tt_arc_fw_ver": "2.34.0.0",
    "tt_eth_fw_ver": "6.15.0",
    "tt_m3app_fw_ver": "5.12.0.0",
    "tt_m3bl_fw_ver": "5.12.0.0",
    "tt_ttflash_ver": "3.4.1",
    "tt_aiclk": "500",
    "tt_axiclk": "900",
    "tt_arcclk": "540",
    "tt_sim_state": "ok",
}


def sim_tree(root: Path, cards: dict[int, dict[str, str | None]], *, kmd: str | None = "2.4.1", nodes: bool = True) -> Path:
    """A stand-in tree laid out as tt-sim lays out a lab host; an attribute given as None is absent."""
    if kmd is not None:
        put(root / "sys/module/tenstorrent/version", kmd)
    (root / "dev/tenstorrent").mkdir(parents=True, exist_ok=True)
    (root / "proc/driver/tenstorrent").mkdir(parents=True, exist_ok=True)
    for n, overrides in cards.items():
        if nodes:
            (root / "dev/tenstorrent" / str(n)).touch()
        for name, value in {**HEALTHY, **overrides}.items():
            if value is not None:
                put(attr(root, n, name), value)
        put(root / f"proc/driver/tenstorrent/{n}/pids", "")
    return root


def attr(root: Path, n: int, name: str) -> Path:
    return root / "sys/class/tenstorrent" / f"tenstorrent!{n}" / name


def put(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def tt_smi(root: Path | None, *args: str, timeout: float = 20) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TT_SIM_ROOT"}
    if root is not None:
        env["TT_SIM_ROOT"] = str(root)
    return subprocess.run(
        [sys.executable, str(TT_SMI), *args], capture_output=True, text=True, env=env, timeout=timeout, stdin=subprocess.DEVNULL
    )


def plain(text: str) -> str:
    return ANSI.sub("", text)


def no_traceback(result: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in result.stdout + result.stderr, result.stderr


def snapshot_of(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, result.stdout + result.stderr
    snapshot = parse_snapshot(result.stdout)
    assert snapshot is not None, result.stdout
    return snapshot


# ---------------------------------------------------------------------------------------------
# Snapshot


def test_snapshot_follows_the_real_schema_and_the_harness_reads_it(tmp_path):
    tree = sim_tree(tmp_path, {0: {}})
    result = tt_smi(tree, "-s", "--snapshot_no_tty")
    snapshot = snapshot_of(result)
    # Not a terminal: the JSON is all of stdout, as tt-smi's own test_snapshot_no_tty expects.
    assert json.loads(result.stdout) == snapshot
    assert list(snapshot) == ["time", "host_info", "host_sw_vers", "device_info", "processes"]
    assert list(snapshot["host_info"]) == ["OS", "Distro", "Kernel", "Hostname", "Platform", "Python", "Memory", "Driver"]
    assert snapshot["host_info"]["Driver"] == "TT-KMD 2.4.1"
    assert list(snapshot["host_sw_vers"]) == ["tt_smi", "pyluwen", "tt_umd"]
    assert all(v.endswith("-sim") for v in snapshot["host_sw_vers"].values())

    (device,) = snapshot["device_info"]
    assert list(device) == ["smbus_telem", "board_info", "telemetry", "firmwares", "limits"]
    assert list(device["board_info"]) == [
        "bus_id", "board_type", "board_id", "coords", "dram_status", "dram_speed", "pcie_speed", "pcie_width",
    ]
    assert device["board_info"]["board_id"] == "0000001000000000"  # tt_serial, as 16 hex digits
    assert device["board_info"]["dram_status"] is True and device["board_info"]["dram_speed"] == "12G"
    assert {"voltage", "current", "aiclk", "power", "board_power", "asic_temperature", "fan_speed", "heartbeat"} <= set(device["telemetry"])
    assert device["telemetry"]["heartbeat"] == "1234" and device["telemetry"]["aiclk"].strip() == "500"
    assert device["firmwares"] == {
        "fw_bundle_version": "18.5.0.0", "tt_flash_version": "3.4.1.0", "cm_fw": "2.34.0.0", "cm_fw_date": "2025-01-22",
        "eth_fw": "6.15.0", "dm_bl_fw": "5.12.0.0", "dm_app_fw": "5.12.0.0", "gddr_fw": "N/A",
    }
    assert {"ETH_FW_VERSION", "DDR_STATUS", "PCIE_STATUS", "FAULTS", "ARC3_HEALTH", "AICLK", "ASIC_TEMPERATURE"} <= set(device["smbus_telem"])
    assert device["smbus_telem"]["FW_BUNDLE_VERSION"] == "0x12050000"
    assert set(device["limits"]) >= {"vdd_min", "vdd_max", "tdp_limit", "tdc_limit", "asic_fmax", "thm_limit"}
    # What preflight takes from it (harness/core/hostfacts.py).
    assert _smi_boards(snapshot) == (SmiBoard(board_type="n150 L", bus_id="0000:00:00.0", fw_bundle="18.5.0.0"),)


def test_bus_id_is_the_pci_address_when_sysfs_links_one(tmp_path):
    tree = build_host(tmp_path, {0: Card(bdf="0000:05:00.0")})
    snapshot = snapshot_of(tt_smi(tree, "-s", "--snapshot_no_tty"))
    assert _smi_boards(snapshot) == (SmiBoard("n150 L", "0000:05:00.0", "18.5.0.0"),)


def test_several_cards_and_an_n300_remote_chip(tmp_path):
    tree = sim_tree(tmp_path, {0: {}, 1: {"tt_card_type": "n300", "tt_fw_bundle_ver": "18.6.0"}})
    boards = _smi_boards(snapshot_of(tt_smi(tree, "-s", "--snapshot_no_tty")))
    # tt-umd numbers the PCIe chips first, then the n300's remote chip (no PCI address).
    assert boards == (
        SmiBoard("n150 L", "0000:00:00.0", "18.5.0.0"),
        SmiBoard("n300 L", "0000:01:00.0", "18.6.0.0"),
        SmiBoard("n300 R", "N/A", "18.6.0.0"),
    )


def test_processes_using_the_cards(tmp_path):
    tree = sim_tree(tmp_path, {0: {}, 1: {}})
    put(tree / "proc/driver/tenstorrent/0/pids", "4242\n77")
    put(tree / "proc/driver/tenstorrent/1/pids", "4242")
    (tree / "proc/4242").mkdir(parents=True)
    (tree / "proc/4242/cmdline").write_bytes(b"python3\0-m\0pytest\0tests/\0")
    put(tree / "proc/77/comm", "ttml_tests")  # no cmdline: tt-smi falls back to comm
    processes = snapshot_of(tt_smi(tree, "-s", "--snapshot_no_tty"))["processes"]
    me = __import__("pwd").getpwuid(os.getuid()).pw_name
    assert processes == [
        {"pid": 77, "user": me, "device": 0, "cmdline": "ttml_tests"},
        {"pid": 4242, "user": me, "device": 0, "cmdline": "python3 -m pytest tests/"},
        {"pid": 4242, "user": me, "device": 1, "cmdline": "python3 -m pytest tests/"},
    ]


def test_missing_attributes_read_na(tmp_path):
    tree = sim_tree(tmp_path, {0: {name: None for name in HEALTHY if name != "tt_card_type"}})
    result = tt_smi(tree, "-s", "--snapshot_no_tty")
    no_traceback(result)
    (device,) = snapshot_of(result)["device_info"]
    assert device["firmwares"]["fw_bundle_version"] == "N/A" and device["firmwares"]["eth_fw"] == "N/A"
    assert device["telemetry"]["heartbeat"] == "N/A" and device["telemetry"]["aiclk"] == "N/A"
    assert device["board_info"]["board_id"] == "N/A"
    assert device["smbus_telem"]["FW_BUNDLE_VERSION"] is None
    assert device["board_info"]["board_type"] == "n150 L"


def test_hang_armed_card_still_answers(tmp_path):
    tree = sim_tree(tmp_path, {0: {"tt_sim_state": "hang-armed"}})
    assert _smi_boards(snapshot_of(tt_smi(tree, "-s", "--snapshot_no_tty")))[0].board_type == "n150 L"


def test_f_writes_the_snapshot_to_a_file(tmp_path):
    tree = sim_tree(tmp_path / "host", {0: {}})
    target = tmp_path / "out" / "snap.json"
    result = tt_smi(tree, "-f", str(target))
    assert result.returncode == 0, result.stdout + result.stderr
    assert plain(result.stdout).strip() == f"Saved tt-smi log to: {target}"
    assert _smi_boards(json.loads(target.read_text()))[0].fw_bundle == "18.5.0.0"
    # As in tt_smi_main: -s wins, the snapshot goes to stdout; `-f -` is stdout too.
    other = tmp_path / "other.json"
    assert parse_snapshot(tt_smi(tree, "-s", "-f", str(other)).stdout) is not None and not other.exists()
    assert parse_snapshot(tt_smi(tree, "-f", "-").stdout) is not None


def test_f_to_an_unwritable_place_is_a_message_not_a_traceback(tmp_path):
    tree = sim_tree(tmp_path / "host", {0: {}})
    (tmp_path / "file").write_text("")
    result = tt_smi(tree, "-f", str(tmp_path / "file" / "snap.json"))
    assert result.returncode == 1
    no_traceback(result)


# ---------------------------------------------------------------------------------------------
# Fatal cases


@pytest.mark.parametrize("args", [("-s", "--snapshot_no_tty"), ("-ls",), ("-r",), ("-r", "0")])
def test_no_driver(tmp_path, args):
    tree = sim_tree(tmp_path, {0: {}}, kmd=None)
    result = tt_smi(tree, *args)
    assert result.returncode == 1
    assert result.stdout == f"\x1b[91m {NO_DRIVER}  \x1b[0m\n"  # print(RED, "... ", ENDC)


def test_empty_version_file_is_no_driver(tmp_path):
    tree = sim_tree(tmp_path, {0: {}}, kmd="")
    result = tt_smi(tree, "-s")
    assert result.returncode == 1 and NO_DRIVER in result.stdout


@pytest.mark.parametrize("args", [("-s", "--snapshot_no_tty"), ("-ls",), ("-r",), ("-r", "/dev/tenstorrent/0")])
def test_no_device_nodes(tmp_path, args):
    tree = sim_tree(tmp_path, {0: {}}, nodes=False)
    result = tt_smi(tree, *args)
    assert result.returncode == 1
    assert plain(result.stdout).strip() == NO_DEVICES


def test_no_dev_tenstorrent_folder(tmp_path):
    tree = sim_tree(tmp_path, {})
    (tree / "dev/tenstorrent").rmdir()
    result = tt_smi(tree, "-s")
    assert result.returncode == 1 and NO_DEVICES in result.stdout


def test_this_machine_has_no_driver():
    # Without TT_SIM_ROOT the script reads the real /sys: this machine has no Tenstorrent card.
    assert not Path("/sys/module/tenstorrent/version").exists()
    result = tt_smi(None, "-s", "--snapshot_no_tty")
    assert result.returncode == 1 and NO_DRIVER in result.stdout


def test_outside_a_stand_in_tree_a_node_must_be_a_character_device(tmp_path, monkeypatch):
    loader = importlib.machinery.SourceFileLoader("standin_tt_smi", str(TT_SMI))
    spec = importlib.util.spec_from_loader("standin_tt_smi", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    folder = tmp_path / "dev/tenstorrent"
    folder.mkdir(parents=True)
    (folder / "0").touch()
    (folder / "by-id").mkdir()
    monkeypatch.setattr(module, "ROOT", str(tmp_path))
    monkeypatch.setattr(module, "SIM_ROOT", "")  # a real host: ROOT is / and nodes are real
    assert module.device_numbers() == []
    if os.geteuid() == 0:
        os.mknod(folder / "1", stat.S_IFCHR | 0o666, os.makedev(1, 3))
        assert module.device_numbers() == [1]
    monkeypatch.setattr(module, "SIM_ROOT", str(tmp_path))
    assert sorted(module.device_numbers()) == ([0, 1] if os.geteuid() == 0 else [0])


# ---------------------------------------------------------------------------------------------
# A hung card


def test_hung_card_fails_like_an_arc_timeout_in_bounded_time(tmp_path):
    tree = sim_tree(tmp_path, {0: {"tt_sim_state": "hung"}})
    started = time.monotonic()
    result = tt_smi(tree, "-s", "--snapshot_no_tty", timeout=HUNG_BOUND + 5)
    elapsed = time.monotonic() - started
    assert elapsed < HUNG_BOUND
    assert elapsed >= 1.0  # tt-umd's ARC_MESSAGE_TIMEOUT
    assert result.returncode == 1
    # tt_smi.py main: print(RED, f"Error in detecting devices!\n{e}\n Exiting...", ENDC)
    assert result.stdout == f"\x1b[91m Error in detecting devices!\n{ARC_TIMEOUT}\n Exiting... \x1b[0m\n"
    assert parse_snapshot(result.stdout) is None
    no_traceback(result)


def test_hung_card_fails_the_board_list_too(tmp_path):
    tree = sim_tree(tmp_path, {0: {}, 1: {"tt_sim_state": "hung"}})
    result = tt_smi(tree, "-ls")
    assert result.returncode == 1 and ARC_TIMEOUT in result.stdout


def test_unreadable_attribute_is_a_card_that_does_not_answer(tmp_path):
    tree = sim_tree(tmp_path, {0: {"tt_fw_bundle_ver": None}})
    attr(tree, 0, "tt_fw_bundle_ver").mkdir()  # reading it fails, as a hung card's attribute read does
    result = tt_smi(tree, "-s", "--snapshot_no_tty")
    assert result.returncode == 1
    assert "Error in detecting devices!" in result.stdout and ARC_TIMEOUT in result.stdout
    assert "tt-smi (stand-in): cannot read" in result.stderr and "tt_fw_bundle_ver" in result.stderr
    no_traceback(result)


# ---------------------------------------------------------------------------------------------
# Reset


def reset_lines(*indices: int) -> list[str]:
    """tt-tools-common chip_reset.py full_lds_reset, then tt-smi's re-init line."""
    listed = ", ".join(map(str, indices))
    lines = [f"Starting reset on devices at PCI indices: {listed}", f"Waiting for {max(2, 0.4 * len(indices))} seconds for potential hotplug removal."]
    for n in indices:
        lines += ["Waiting for devices to reappear on pci bus...", f"Reset successfully completed for device at PCI index {n}."]
    return lines + [f"Finishing reset on devices at PCI indices: {listed}", "Re-initializing boards after reset...."]


def lines(result: subprocess.CompletedProcess) -> list[str]:
    return [line.strip() for line in plain(result.stdout).splitlines() if line.strip()]


def states(tree: Path, *ns: int) -> list[str]:
    return [attr(tree, n, "tt_sim_state").read_text().strip() for n in ns]


def test_reset_clears_a_hung_card(tmp_path):
    tree = sim_tree(tmp_path, {0: {"tt_sim_state": "hung"}})
    result = tt_smi(tree, "-r", "0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert lines(result) == ["Resetting UMD logical IDs: [0]", *reset_lines(0)]
    assert "\x1b[92m Reset successfully completed for device at PCI index 0. \x1b[0m" in result.stdout
    assert states(tree, 0) == ["ok"]
    assert _smi_boards(snapshot_of(tt_smi(tree, "-s", "--snapshot_no_tty")))[0].board_type == "n150 L"


@pytest.mark.parametrize(
    "args, preface",
    [
        ((), []),
        (("all",), []),
        (("0,1",), ["Resetting UMD logical IDs: [0, 1]"]),
        (("1", "0"), ["Resetting UMD logical IDs: [0, 1]"]),
        (("/dev/tenstorrent/0,/dev/tenstorrent/1",), ["Resetting /dev/tenstorrent IDs: [0, 1]"]),
        (("/dev/tenstorrent/1", "/dev/tenstorrent/0"), ["Resetting /dev/tenstorrent IDs: [0, 1]"]),
        (("0000:00:00.0,0000:01:00.0",), ["Resetting PCI BDFs: ['0000:00:00.0', '0000:01:00.0']"]),
    ],
)
def test_reset_target_forms(tmp_path, args, preface):
    tree = sim_tree(tmp_path, {0: {"tt_sim_state": "hung"}, 1: {"tt_sim_state": "hang-armed"}})
    result = tt_smi(tree, "-r", *args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert lines(result) == [*preface, *reset_lines(0, 1)]
    assert states(tree, 0, 1) == ["ok", "ok"]


def test_reset_one_card_leaves_the_other_and_reinit_sees_it_hung(tmp_path):
    tree = sim_tree(tmp_path, {0: {"tt_sim_state": "hung"}, 1: {"tt_sim_state": "hung"}})
    result = tt_smi(tree, "-r", "/dev/tenstorrent/0")
    assert states(tree, 0, 1) == ["ok", "hung"]
    # tt_smi/reset.py pci_board_reset: re-detection after the reset fails on the card still hung.
    assert result.returncode == 1
    assert lines(result)[-2:] == ["Error when re-initializing chips!", ARC_TIMEOUT]
    assert tt_smi(tree, "-r", "/dev/tenstorrent/1", "--no_reinit").returncode == 0
    assert states(tree, 0, 1) == ["ok", "ok"]


def test_reset_of_a_card_that_is_not_there(tmp_path):
    tree = sim_tree(tmp_path, {0: {"tt_sim_state": "hung"}})
    result = tt_smi(tree, "-r", "/dev/tenstorrent/0,/dev/tenstorrent/3")
    # tt_smi/reset.py luwen_pci_reset: the missing one is reported and skipped, the rest is reset.
    assert "Error accessing board at PCI index 3! Use -ls to see all devices available to reset" in result.stdout
    assert result.returncode == 0 and states(tree, 0) == ["ok"]


@pytest.mark.parametrize(
    "args, message",
    [
        (("x",), "Invalid device target: 'x'. Use UMD logical ID (integer), PCI BDF (e.g. 0000:0a:00.0), or /dev/tenstorrent/<integer>."),
        (("/dev/tenstorrent/a",), "Invalid path: /dev/tenstorrent/a (expected /dev/tenstorrent/<integer>)"),
        (("0,/dev/tenstorrent/0",), "Mixed device target kinds are not allowed."),
        (("0", "all"), "Use 'all' as the only argument to select all devices"),
    ],
)
def test_reset_rejects_bad_targets(tmp_path, args, message):
    tree = sim_tree(tmp_path, {0: {"tt_sim_state": "hung"}})
    result = tt_smi(tree, "-r", *args)
    assert result.returncode == 1 and message in result.stdout
    assert states(tree, 0) == ["hung"]


def test_reset_needs_kmd_2_4_1(tmp_path):
    tree = sim_tree(tmp_path, {0: {"tt_sim_state": "hung"}}, kmd="2.3.0")
    result = tt_smi(tree, "-r")
    assert result.returncode == 1
    assert lines(result) == [
        "Current driver version: 2.3.0",
        "Operation 'reset' requires Tenstorrent driver version 2.4.1 or greater. Your version is too old.",
        "Please update your driver using tt-kmd: https://github.com/tenstorrent/tt-kmd",
    ]
    assert states(tree, 0) == ["hung"]


def test_reset_that_cannot_write_the_state_fails_without_a_traceback(tmp_path):
    tree = sim_tree(tmp_path, {0: {"tt_sim_state": None}})
    attr(tree, 0, "tt_sim_state").mkdir()
    result = tt_smi(tree, "-r", "0", "--no_reinit")
    assert result.returncode == 1
    assert "Post-reset actions did not complete successfully for device at PCI index 0." in result.stdout
    no_traceback(result)


# ---------------------------------------------------------------------------------------------
# -ls, --version, usage


def test_list_shows_node_and_bdf(tmp_path):
    tree = sim_tree(tmp_path, {0: {}, 3: {}})
    result = tt_smi(tree, "-ls")
    assert result.returncode == 0
    assert "All available boards on host (UMD):" in result.stdout and "Boards that can be reset (UMD):" in result.stdout
    rows = [re.split(r"\s*│\s*", line.strip("│ ")) for line in result.stdout.splitlines() if line.startswith("│")]
    assert rows[:2] == [
        ["0", "0000:00:00.0", "/dev/tenstorrent/0", "Wormhole", "n150 L", "0000001000000000"],
        ["1", "0000:03:00.0", "/dev/tenstorrent/3", "Wormhole", "n150 L", "0000001000000000"],
    ]


def test_version_is_marked_as_a_stand_in():
    result = tt_smi(None, "--version")
    assert result.returncode == 0 and result.stdout.strip().endswith("-sim")
    assert tt_smi(None, "-v").stdout == result.stdout


def test_unknown_option_is_a_usage_error():
    result = tt_smi(None, "--bogus")
    assert result.returncode == 2
    assert result.stderr.startswith("usage: tt-smi") and "unrecognized arguments: --bogus" in result.stderr


def test_no_option_without_a_terminal(tmp_path):
    tree = sim_tree(tmp_path, {0: {}})
    result = tt_smi(tree)
    assert result.returncode == 1
    assert plain(result.stdout) == "No TTY detected! Interactive shell required.\nUse tt-smi -s for snapshot output.\n"


# ---------------------------------------------------------------------------------------------
# Preflight through the stand-in, as on a lab host


def wrapper(folder: Path, tree: Path) -> str:
    """What a lab host's PATH holds, pointed at the stand-in tree."""
    script = folder / "tt-smi"
    script.write_text(
        f"#!/bin/sh\nTT_SIM_ROOT={shlex.quote(str(tree))} exec {shlex.quote(sys.executable)} {shlex.quote(str(TT_SMI))} \"$@\"\n"
    )
    script.chmod(0o755)
    return str(script)


def lab_preflight(tmp_path: Path, state: str | None, *, beat: bool):
    """Preflight of a lab host with one n150; ``state`` None: the tree is already there."""
    tree = tmp_path / "host"
    if state is not None:
        build_host(tree, {0: Card(bdf="0000:01:00.0")}, kmd="2.4.1")
        put(attr(tree, 0, "tt_sim_state"), state)
    host = Host(name="wh-01", transport="local", boards=(BoardSlot("n150", (0,)),))
    run = lambda: preflight(  # noqa: E731
        LocalTransport(host.name), host, root=str(tree), tt_smi=wrapper(tmp_path, tree), heartbeat_delay=0.2
    )
    if beat:
        with beating(heartbeat_path(tree, 0)):
            report = run()
    else:
        report = run()
    return {check.name: check for check in report.checks}


def test_preflight_of_a_healthy_card_through_the_stand_in(tmp_path):
    checks = lab_preflight(tmp_path, "ok", beat=True)
    smi = checks["tt-smi"]
    assert smi.status is CheckStatus.OK, smi.reason
    assert smi.reason == "snapshot: n150 L (fw 18.5.0.0)"
    assert checks["heartbeat"].status is CheckStatus.OK


def test_preflight_of_a_hung_card_through_the_stand_in(tmp_path):
    checks = lab_preflight(tmp_path, "hung", beat=False)
    smi = checks["tt-smi"]
    assert smi.status is CheckStatus.FAULT, smi.reason
    assert "Timed out after waiting 1000 ms for ARC to respond" in smi.reason
    assert checks["heartbeat"].category is EnvCategory.DEVICE_HANG
    # `tt-smi -r` on the host, as the heartbeat check advises, and the host is fit again.
    reset = subprocess.run([wrapper(tmp_path, tmp_path / "host"), "-r", "/dev/tenstorrent/0"], capture_output=True, text=True, timeout=20)
    assert reset.returncode == 0, reset.stdout + reset.stderr
    checks = lab_preflight(tmp_path, None, beat=True)
    assert checks["tt-smi"].status is CheckStatus.OK and checks["heartbeat"].status is CheckStatus.OK


def test_preflight_names_the_hung_card_a_device_hang_in_the_tt_smi_check(tmp_path):
    checks = lab_preflight(tmp_path, "hung", beat=False)
    assert checks["tt-smi"].category is EnvCategory.DEVICE_HANG
