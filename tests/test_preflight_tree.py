"""Preflight end to end: the real gather script, run through a real transport.

Against this machine's real root (no Tenstorrent card, no driver, a running Docker engine) and
against STAND-IN host trees built in tmp_path (tests/hosttree.py): a fake /sys, /dev and /proc
laid out as tt-kmd, the kernel and tt-system-tools lay them out on a real host (ROOT argument of
the gather).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.core.hostfacts import CheckStatus, PreflightReport
from harness.core.inventory import BoardSlot, Host
from harness.core.outcomes import EnvCategory, Outcome
from harness.execution.preflight import preflight
from harness.execution.transport import LocalTransport, SshTransport
from tests.hosttree import Card, beating, build_host, fake_tt_smi, heartbeat_path, snapshot, write
from tests.sshd import SshServer

DELAY = 0.2  # heartbeat read twice this far apart: short, the tests make the counter move


def host(*boards: tuple[str, tuple[int, ...]], **fields) -> Host:
    return Host(name="wh-01", transport="local", boards=tuple(BoardSlot(t, d) for t, d in boards), **fields)


def check(tree: Path, lab_host: Host, **kwargs) -> PreflightReport:
    kwargs.setdefault("tt_smi", None)
    return preflight(LocalTransport(lab_host.name), lab_host, root=str(tree), heartbeat_delay=DELAY, **kwargs)


def statuses(report: PreflightReport) -> dict[str, str]:
    return {c.name: c.status.value for c in report.checks}


def the(report: PreflightReport, name: str):
    return next(c for c in report.checks if c.name == name)


# ---------------------------------------------------------------------------------------------
# This machine: no card, no driver, a running Docker engine


@pytest.mark.docker
def test_this_machine_has_no_driver_and_no_card_but_a_working_docker():
    report = preflight(LocalTransport(), host(("n150", (0,))), heartbeat_delay=DELAY)
    assert the(report, "kmd").category is EnvCategory.DRIVER_MISSING
    assert "/sys/module/tenstorrent/version does not exist" in the(report, "kmd").reason
    assert the(report, "device-nodes").category is EnvCategory.DEVICE_MISSING
    assert the(report, "docker").status is CheckStatus.OK
    assert the(report, "disk").status is CheckStatus.OK
    smi = the(report, "tt-smi")
    if shutil.which("tt-smi"):
        # The real tt-smi (PyPI tt-smi) on a machine without tt-kmd: "No Tenstorrent driver detected!"
        assert (smi.category, smi.reason[:23]) == (EnvCategory.DRIVER_MISSING, "tt-smi finds no tt-kmd:")
    else:
        assert (smi.status, smi.reason) == (CheckStatus.SKIP, "tt-smi is not installed on the host")
    verdict = report.verdict()
    assert verdict.outcome is Outcome.ENV_FAULT and verdict.category is EnvCategory.DRIVER_MISSING
    assert report.facts is not None and report.facts.root == "/"
    assert report.facts.has_path("/sys") and report.facts.has_path("/dev")


# ---------------------------------------------------------------------------------------------
# Stand-in hosts


def test_healthy_n150(tmp_path):
    tree = build_host(tmp_path / "host", {0: Card()})
    tt_smi = fake_tt_smi(tmp_path, snapshot("n150 L"))
    with beating(heartbeat_path(tree, 0)):
        report = check(tree, host(("n150", (0,))), tt_smi=tt_smi)
    assert report.ok, report.checks
    assert set(statuses(report).values()) == {"ok"}
    assert the(report, "card-type").reason == "device 0: n150"
    assert the(report, "hugepages").reason == "4 1G hugepages reserved, 4 free, /dev/hugepages-1G mounted"
    facts = report.facts
    assert facts.iommu is False  # no IOMMU group: hugepages were required, and present
    assert facts.device(0).bdf == "0000:01:00.0"
    assert facts.has_path("/dev/hugepages-1G") and not facts.has_path("/dev/hugepages")
    assert [b.board_type for b in facts.tt_smi.boards] == ["n150 L"]


def test_healthy_n300_with_iommu_needs_no_hugepages(tmp_path):
    tree = build_host(tmp_path, {0: Card(card_type="n300", iommu="DMA-FQ")}, hugepages=None, hugepage_mount=None)
    tt_smi = fake_tt_smi(tmp_path, snapshot("n300 L", "n300 R"))
    with beating(heartbeat_path(tree, 0)):
        report = check(tree, host(("n300", (0,))), tt_smi=tt_smi)
    assert report.ok, report.checks
    assert the(report, "hugepages").status is CheckStatus.OK
    assert "IOMMU on" in the(report, "hugepages").reason
    assert report.facts.iommu is True
    assert the(report, "tt-smi").reason == "snapshot: n300 L (fw 18.5.0.0), n300 R (fw 18.5.0.0)"


def test_iommu_passthrough_still_needs_hugepages(tmp_path):
    tree = build_host(tmp_path, {0: Card(iommu="identity")}, hugepages=None, hugepage_mount=None)
    report = check(tree, host(("n150", (0,))))
    assert report.facts.iommu is False
    assert the(report, "hugepages").category is EnvCategory.HUGEPAGES


def test_old_kmd(tmp_path):
    tree = build_host(tmp_path, {0: Card(heartbeat=None)}, kmd="1.33")
    report = check(tree, host(("n150", (0,))))
    kmd = the(report, "kmd")
    assert kmd.category is EnvCategory.DRIVER_VERSION
    assert "tt-kmd 1.33 is older than 2.0.0" in kmd.reason
    assert report.verdict().category is EnvCategory.DRIVER_VERSION


def test_missing_node_of_a_t3000(tmp_path):
    cards = {n: Card(card_type="n300", bdf=f"0000:0{n + 1}:00.0", heartbeat=None) for n in range(3)}
    tree = build_host(tmp_path, cards, hugepages=(16, 16))
    report = check(tree, host(("t3000", (0, 1, 2, 3))))
    nodes = the(report, "device-nodes")
    assert nodes.category is EnvCategory.DEVICE_MISSING
    assert nodes.reason == "/dev/tenstorrent/3 (t3000) is missing"
    assert the(report, "card-type").reason == "device 0: n300; device 1: n300; device 2: n300"
    assert report.verdict().category is EnvCategory.DEVICE_MISSING


def test_extra_node_is_a_warning(tmp_path):
    tree = build_host(tmp_path, {0: Card(heartbeat=None), 1: Card(heartbeat=None, bdf="0000:02:00.0")})
    report = check(tree, host(("n150", (0,))))
    assert report.ok
    nodes = the(report, "device-nodes")
    assert nodes.status is CheckStatus.WARN and "also /dev/tenstorrent/1, not in the inventory" in nodes.reason


def test_node_that_is_not_a_character_device(tmp_path):
    tree = build_host(tmp_path, {0: Card(heartbeat=None, node=False)})
    write(tree / "dev/tenstorrent/0", "")
    report = check(tree, host(("n150", (0,))))
    assert the(report, "device-nodes").reason == "/dev/tenstorrent/0 (n150) is not a character device"


def test_wrong_card_type(tmp_path):
    tree = build_host(tmp_path, {0: Card(card_type="n150", heartbeat=None)})
    report = check(tree, host(("n300", (0,))))
    card = the(report, "card-type")
    assert card.status is CheckStatus.FAULT and card.category is EnvCategory.DEVICE_MISSING
    assert card.reason == "device 0: the card is a n150, the inventory declares a n300 (tt_card_type n300)"


def test_old_firmware(tmp_path):
    tree = build_host(tmp_path, {0: Card(fw_bundle="18.2.0.0", heartbeat=None)})
    report = check(tree, host(("n150", (0,))))
    firmware = the(report, "firmware")
    assert firmware.category is EnvCategory.FIRMWARE
    assert "firmware bundle 18.2.0.0 is older than 18.3.0" in firmware.reason


def test_busy_card_names_its_processes(tmp_path):
    tree = build_host(tmp_path, {0: Card(heartbeat=None, pids=((4242, "ttml_tests"), (4243, "python3")))})
    report = check(tree, host(("n150", (0,))))
    busy = the(report, "device-busy")
    assert busy.category is EnvCategory.DEVICE_BUSY
    assert "in use by PID 4242 (ttml_tests), PID 4243 (python3)" in busy.reason
    assert report.verdict().category is EnvCategory.DEVICE_BUSY


def test_heartbeat_not_advancing_is_a_hang(tmp_path):
    tree = build_host(tmp_path, {0: Card(heartbeat="77")})
    report = check(tree, host(("n150", (0,))))
    beat = the(report, "heartbeat")
    assert beat.category is EnvCategory.DEVICE_HANG
    assert "stuck at 77 over 0.2 s" in beat.reason and "tt-smi -r /dev/tenstorrent/0" in beat.reason


def test_heartbeat_advancing_on_every_card(tmp_path):
    cards = {0: Card(card_type="n300"), 1: Card(card_type="n300", bdf="0000:02:00.0")}
    tree = build_host(tmp_path, cards, hugepages=(2, 2))
    with beating(heartbeat_path(tree, 0), heartbeat_path(tree, 1)):
        report = check(tree, host(("n300", (0,)), ("n300", (1,))))
    assert the(report, "heartbeat").status is CheckStatus.OK
    # Two n300 need 4 hugepages: 2 reserved is below what UMD maps.
    assert the(report, "hugepages").category is EnvCategory.HUGEPAGES


def test_one_card_hung_among_live_ones(tmp_path):
    cards = {0: Card(), 1: Card(bdf="0000:02:00.0", heartbeat="5")}
    tree = build_host(tmp_path, cards)
    with beating(heartbeat_path(tree, 0)):
        report = check(tree, host(("n150", (0,)), ("n150", (1,))))
    beat = the(report, "heartbeat")
    assert beat.status is CheckStatus.FAULT
    assert beat.reason.startswith("device 1: firmware heartbeat stuck at 5")
    assert "device 0" not in beat.reason


def test_missing_hugepage_mount(tmp_path):
    tree = build_host(tmp_path, {0: Card(heartbeat=None)}, hugepage_mount=None)
    report = check(tree, host(("n150", (0,))))
    pages = the(report, "hugepages")
    assert pages.category is EnvCategory.HUGEPAGES and "no hugetlbfs mounted at /dev/hugepages-1G" in pages.reason
    assert not report.facts.has_path("/dev/hugepages-1G")


@pytest.mark.parametrize(
    "pages, status, reason",
    [
        ((1, 1), "fault", "1 1G hugepage(s) reserved, n300 needs at least 2 (tt-system-tools reserves 4)"),
        ((4, 1), "fault", "only 1 of 4 1G hugepages free, n300 needs 2: another process holds the rest"),
        ((2, 2), "warn", "2 1G hugepage(s) reserved (2 free): enough for n300, below the 4 tt-system-tools reserves"),
        ((0, 0), "fault", "0 1G hugepage(s) reserved, n300 needs at least 2 (tt-system-tools reserves 4)"),
    ],
)
def test_hugepage_counts(tmp_path, pages, status, reason):
    tree = build_host(tmp_path, {0: Card(card_type="n300", heartbeat=None)}, hugepages=pages)
    report = check(tree, host(("n300", (0,))))
    assert (the(report, "hugepages").status.value, the(report, "hugepages").reason) == (status, reason)


def test_kernel_without_1g_hugepages(tmp_path):
    tree = build_host(tmp_path, {0: Card(heartbeat=None)}, hugepages=None)
    pages = the(check(tree, host(("n150", (0,)))), "hugepages")
    assert pages.reason.endswith("nr_hugepages: missing: the kernel has no 1G hugepage support")


@pytest.mark.parametrize(
    "stdout, category",
    [
        ("\x1b[91m No Tenstorrent driver detected! Please install driver using tt-kmd: https://github.com/tenstorrent/tt-kmd  \x1b[0m\n", EnvCategory.DRIVER_MISSING),
        ("\x1b[91m No Tenstorrent devices detected! Please check your hardware and try again. Exiting... \x1b[0m\n", EnvCategory.DEVICE_MISSING),
        (" Error in detecting devices!\nFailed to map bar0_uc for 0 with error Invalid argument (os error 22)\n Exiting...\n", EnvCategory.DEVICE_HANG),
    ],
)
def test_tt_smi_errors_get_their_category(tmp_path, stdout, category):
    tree = build_host(tmp_path / "host", {0: Card(heartbeat=None)})
    report = check(tree, host(("n150", (0,))), tt_smi=fake_tt_smi(tmp_path, stdout, status=1))
    assert the(report, "tt-smi").category is category


def test_tt_smi_not_installed_is_skipped(tmp_path):
    tree = build_host(tmp_path, {0: Card(heartbeat=None)})
    report = check(tree, host(("n150", (0,))), tt_smi="tt-smi-that-is-not-installed")
    assert the(report, "tt-smi").status is CheckStatus.SKIP
    assert report.ok


def test_unreachable_docker_engine(tmp_path):
    tree = build_host(tmp_path, {0: Card(heartbeat=None)})
    report = check(tree, host(("n150", (0,)), docker=f"unix://{tmp_path}/no-such.sock"))
    docker = the(report, "docker")
    assert docker.category is EnvCategory.DOCKER
    # The engine's own words, from its stderr: the section opened just before it ran.
    assert docker.reason.startswith(f"the Docker engine is not reachable: Cannot connect to the Docker daemon at unix://{tmp_path}/no-such.sock")
    assert the(report, "disk").status is CheckStatus.SKIP


@pytest.mark.docker
def test_too_little_disk_for_images(tmp_path):
    from dataclasses import replace

    from harness.core.hostfacts import GIB, default_preflight_config

    config = replace(default_preflight_config(), disk_min_bytes=10**9 * GIB)
    report = check(build_host(tmp_path, {}), host(), config=config)
    disk = the(report, "disk")
    assert disk.category is EnvCategory.DISK and "images need at least 1e+09 GiB" in disk.reason


def test_inventory_values_are_arguments_never_script_text(tmp_path):
    # A hostile root path and Docker endpoint must reach the script as data: nothing runs.
    marker = tmp_path / "PWNED"
    tree = tmp_path / f"host $(touch {marker}) `touch {marker}`; touch {marker} '\" *"
    build_host(tree, {0: Card(heartbeat=None)})
    report = check(tree, host(("n150", (0,)), docker=f"unix:///x$(touch {marker})"))
    assert not marker.exists()
    assert the(report, "card-type").status is CheckStatus.OK  # the tree was read under that root
    assert the(report, "docker").category is EnvCategory.DOCKER


def test_file_content_cannot_fake_a_section(tmp_path):
    tree = build_host(tmp_path, {0: Card(card_type="n150\n@@0000000000000000@@ end", heartbeat=None)})
    report = check(tree, host(("n150", (0,))))
    # The content stays content: the card type reads as the two lines it is, not a valid n150.
    assert the(report, "card-type").status is CheckStatus.FAULT
    assert the(report, "docker").status is not CheckStatus.SKIP  # the output did not end early


def test_unreadable_sysfs_attribute(tmp_path):
    # A directory where a file should be makes `cat` fail, as a hung card's attribute read does.
    tree = build_host(tmp_path, {0: Card(heartbeat=None)})
    target = tree / "sys/devices/pci0000:00/0000:01:00.0/tenstorrent/tenstorrent!0/tt_fw_bundle_ver"
    target.unlink()
    target.mkdir()
    firmware = the(check(tree, host(("n150", (0,)))), "firmware")
    assert firmware.category is EnvCategory.SYSFS and "cannot read tt_fw_bundle_ver" in firmware.reason


@pytest.mark.ssh
def test_gather_over_a_real_ssh_connection(tmp_path, sshd: SshServer):
    tree = build_host(tmp_path / "host", {0: Card(card_type="n300")})
    with SshTransport(sshd.target()) as ssh, beating(heartbeat_path(tree, 0)):
        report = preflight(ssh, host(("n300", (0,))), root=str(tree), tt_smi=None, heartbeat_delay=DELAY)
    assert [(c.name, c.status.value) for c in report.checks if c.status is not CheckStatus.OK] == [
        ("tt-smi", "skip"),
    ]
    assert report.facts.device(0).card_type.value == "n300"


@pytest.mark.ssh
def test_unreachable_ssh_host_is_a_fault_not_a_crash(tmp_path, sshd: SshServer):
    port = sshd.port
    sshd.stop()  # nothing listens there any more
    with SshTransport(sshd.target(port=port)) as ssh:
        report = preflight(ssh, host(("n150", (0,))))
    assert [c.name for c in report.checks] == ["connect"]
    assert report.checks[0].category is EnvCategory.SSH
    assert report.verdict().category is EnvCategory.SSH and report.facts is None
