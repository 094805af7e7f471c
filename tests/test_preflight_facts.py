"""Preflight without a host: parsing gathered output and judging it (harness.core.hostfacts)."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from harness.core.errors import InputError
from harness.core.hostfacts import (
    CHECKS,
    GIB,
    CheckStatus,
    GatherError,
    PreflightReport,
    default_preflight_config,
    evaluate,
    fault,
    load_preflight_config,
    ok,
    parse_gather,
    parse_snapshot,
    parse_version,
    version_below,
    warn,
)
from harness.core.inventory import BoardSlot
from harness.core.outcomes import EnvCategory, Outcome
from harness.core.profiles import default_boards

NONCE = "5eed"
PROBES = ("/dev/hugepages-1G", "/dev/hugepages")

# What the gather script printed on a healthy n300 host (captured from a run, disk figures kept).
N300 = """\
@@5eed@@ kmd.version ok
2.3.0
@@5eed@@ dev.nodes ok
dir by-id
char 0
@@5eed@@ dev.0.node ok
char
@@5eed@@ sys.0 ok
@@5eed@@ sys.0.tt_card_type ok
n300
@@5eed@@ sys.0.tt_fw_bundle_ver ok
18.5.0.0
@@5eed@@ sys.0.tt_heartbeat ok
1000
@@5eed@@ pci.0.bdf ok
0000:01:00.0
@@5eed@@ pci.0.iommu_type missing
@@5eed@@ pids.0 ok
@@5eed@@ sys.0.tt_heartbeat.2 ok
1013
@@5eed@@ mounts.hugetlbfs ok
/dev/hugepages rw,relatime,pagesize=2M
/dev/hugepages-1G rw,relatime,pagesize=1024M
@@5eed@@ hugepages.nr ok
4
@@5eed@@ hugepages.free ok
4
@@5eed@@ probe.0 present
@@5eed@@ probe.1 absent
@@5eed@@ tt-smi.err ok
@@5eed@@ tt-smi rc=0
2025-06-02 10:00:00.000 | info     |             UMD | Opening local chip ids/PCIe ids: {0}/[0] and remote chip ids {1} (cluster.cpp:173)
{
    "time": "2025-06-02T10:00:01.000000",
    "device_info": [
        {"board_info": {"bus_id": "0000:01:00.0", "board_type": "n300 L"}, "firmwares": {"fw_bundle_version": "18.5.0.0"}},
        {"board_info": {"bus_id": "N/A", "board_type": "n300 R"}, "firmwares": {"fw_bundle_version": "18.5.0.0"}}
    ],
    "processes": []
}
@@5eed@@ docker.err ok
@@5eed@@ docker rc=0
20.10.24+dfsg1|/var/lib/docker
@@5eed@@ df.err ok
@@5eed@@ df rc=0
Filesystem     1024-blocks     Used Available Capacity Mounted on
/dev/vda         264212084 12242872  83043016      13% /var/lib/docker
@@5eed@@ end
"""

N300_SLOTS = (BoardSlot("n300", (0,)),)


def with_section(output: str, key: str, head: str, *lines: str) -> str:
    """``output`` with section ``key`` replaced (``head`` is its state), or added before the end."""
    section = f"@@{NONCE}@@ {key} {head}\n" + "".join(line + "\n" for line in lines)
    pattern = re.compile(rf"^@@{NONCE}@@ {re.escape(key)} .*?(?=^@@{NONCE}@@ )", re.MULTILINE | re.DOTALL)
    if pattern.search(output):
        return pattern.sub(lambda _: section, output, count=1)
    return output.replace(f"@@{NONCE}@@ end", section + f"@@{NONCE}@@ end")


def facts_of(output: str = N300, device_ids=(0,)):
    return parse_gather(output, NONCE, root="/", device_ids=device_ids, probe_paths=PROBES, heartbeat_delay=1.0)


def judge(output: str = N300, slots=N300_SLOTS, config=None):
    facts = facts_of(output, tuple(d for s in slots for d in s.devices))
    checks = evaluate(facts, slots, default_boards(), config or default_preflight_config())
    return PreflightReport("wh-01", checks, facts)


def the(report: PreflightReport, name: str):
    return next(c for c in report.checks if c.name == name)


# ---------------------------------------------------------------------------------------------
# Parsing


def test_parse_a_healthy_n300_host():
    facts = facts_of()
    assert facts.kmd_version.value == "2.3.0"
    assert facts.dev_dir and facts.node_numbers == (0,)  # by-id is a folder of links, not a card
    device = facts.device(0)
    assert (device.node, device.sysfs, device.card_type.value, device.fw_bundle.value) == ("char", True, "n300", "18.5.0.0")
    assert (device.heartbeat.value, device.heartbeat_again.value) == ("1000", "1013")
    assert device.bdf == "0000:01:00.0" and device.iommu is False and facts.iommu is False
    assert device.processes == ()
    assert facts.hugetlbfs == (
        ("/dev/hugepages", "rw,relatime,pagesize=2M"),
        ("/dev/hugepages-1G", "rw,relatime,pagesize=1024M"),
    )
    assert (facts.hugepages_nr.value, facts.hugepages_free.value) == ("4", "4")
    assert facts.has_path("/dev/hugepages-1G") and not facts.has_path("/dev/hugepages")
    assert [(b.board_type, b.bus_id, b.fw_bundle) for b in facts.tt_smi.boards] == [
        ("n300 L", "0000:01:00.0", "18.5.0.0"),
        ("n300 R", "N/A", "18.5.0.0"),
    ]
    assert (facts.docker_version, facts.docker_root_dir) == ("20.10.24+dfsg1", "/var/lib/docker")
    assert facts.disk_free_bytes == 83043016 * 1024


def test_healthy_n300_passes_every_check_in_order():
    report = judge()
    assert [c.name for c in report.checks] == list(CHECKS)
    assert {c.status for c in report.checks} == {CheckStatus.OK}, report.checks
    assert report.ok
    with pytest.raises(ValueError, match="passed preflight"):
        report.verdict()


def test_has_path_refuses_paths_that_were_not_probed():
    with pytest.raises(KeyError, match="/opt/x was not probed"):
        facts_of().has_path("/opt/x")


def test_output_cut_short_is_a_gather_error():
    with pytest.raises(GatherError):
        facts_of(N300.split("@@5eed@@ docker.err")[0])


def test_marks_with_another_nonce_are_content():
    output = with_section(N300, "sys.0.tt_card_type", "ok", "n300", "@@beef@@ end", "@@beef@@ kmd.version ok")
    assert facts_of(output).device(0).card_type.text == "n300\n@@beef@@ end\n@@beef@@ kmd.version ok"
    with pytest.raises(GatherError):
        parse_gather(N300, "beef", root="/", device_ids=(0,), probe_paths=(), heartbeat_delay=1.0)


def test_busy_card_processes_and_unknown_comm():
    output = with_section(N300, "pids.0", "ok", "4242", "", "4243 extra")
    output = with_section(output, "comm.4242", "ok", "ttml_tests")
    assert facts_of(output).device(0).processes == ((4242, "ttml_tests"), (4243, "?"))


def test_snapshot_json_after_log_lines_with_braces():
    text = 'warn {not json}\n  {"device_info": []}\ntrailing {'
    assert parse_snapshot(text) == {"device_info": []}
    assert parse_snapshot("No Tenstorrent driver detected!") is None


@pytest.mark.parametrize(
    "text, minimum, below",
    [
        ("1.33", "2.0.0", True),
        ("2.0", "2.0.0", False),
        ("2.0.0", "2.0.0", False),
        ("v2.10.0-rc1", "2.9.0", False),
        ("18.3.0.0", "18.3.0", False),
        ("18.2.9.0", "18.3.0", True),
        ("80.18.0.0", "18.3.0", False),
    ],
)
def test_versions(text, minimum, below):
    assert version_below(parse_version(text), parse_version(minimum)) is below


def test_unparsable_version():
    assert parse_version("unknown") is None


# ---------------------------------------------------------------------------------------------
# Judging


def test_kmd_missing_and_unparsable():
    report = judge(with_section(N300, "kmd.version", "missing"))
    assert the(report, "kmd").category is EnvCategory.DRIVER_MISSING
    report = judge(with_section(N300, "kmd.version", "ok", "garbage"))
    assert the(report, "kmd").category is EnvCategory.DRIVER_VERSION


def test_no_dev_tenstorrent_at_all():
    output = with_section(N300, "dev.nodes", "missing")
    output = with_section(output, "dev.0.node", "ok", "missing")
    nodes = the(judge(output), "device-nodes")
    assert nodes.category is EnvCategory.DEVICE_MISSING
    assert nodes.reason.startswith("/dev/tenstorrent does not exist: no card is visible")


def test_node_without_sysfs_folder_is_one_sysfs_fault():
    output = N300
    for key in ("sys.0", "sys.0.tt_card_type", "sys.0.tt_fw_bundle_ver", "sys.0.tt_heartbeat", "sys.0.tt_heartbeat.2"):
        output = with_section(output, key, "missing")
    report = judge(output)
    assert the(report, "card-type").category is EnvCategory.SYSFS
    assert the(report, "card-type").reason == "device 0: /sys/class/tenstorrent/tenstorrent!0 is missing although the device node exists"
    assert {the(report, n).status for n in ("firmware", "heartbeat", "device-busy")} == {CheckStatus.SKIP}


def test_card_type_unknown_is_a_warning():
    output = with_section(N300, "sys.0.tt_card_type", "ok", "unknown")
    assert the(judge(output), "card-type").status is CheckStatus.WARN


def test_blackhole_firmware_minimum_is_higher():
    output = with_section(N300, "sys.0.tt_card_type", "ok", "p150b")
    output = with_section(output, "sys.0.tt_fw_bundle_ver", "ok", "18.4.0.0")
    report = judge(output, slots=(BoardSlot("p150", (0,)),))
    assert the(report, "card-type").status is CheckStatus.OK
    assert "older than 18.5.0, the oldest tt-umd supports on blackhole" in the(report, "firmware").reason


def test_unreadable_heartbeat_is_a_hang():
    output = with_section(N300, "sys.0.tt_heartbeat.2", "unreadable", "cat: tt_heartbeat: Input/output error")
    beat = the(judge(output), "heartbeat")
    assert beat.category is EnvCategory.DEVICE_HANG
    assert "Input/output error" in beat.reason and "tt-smi -r /dev/tenstorrent/0" in beat.reason


def test_heartbeat_that_wrapped_around_is_alive():
    output = with_section(N300, "sys.0.tt_heartbeat", "ok", "4294967295")
    output = with_section(output, "sys.0.tt_heartbeat.2", "ok", "12")
    assert the(judge(output), "heartbeat").status is CheckStatus.OK


def test_hugepage_mount_with_the_wrong_page_size():
    output = with_section(N300, "mounts.hugetlbfs", "ok", "/dev/hugepages-1G rw,relatime,pagesize=2M")
    pages = the(judge(output), "hugepages")
    assert pages.category is EnvCategory.HUGEPAGES and "without pagesize=1G" in pages.reason


def test_iommu_dma_translation_waives_hugepages():
    output = with_section(N300, "pci.0.iommu_type", "ok", "DMA")
    output = with_section(output, "mounts.hugetlbfs", "ok")
    output = with_section(output, "hugepages.nr", "missing")
    report = judge(output)
    assert report.facts.iommu is True
    assert the(report, "hugepages").status is CheckStatus.OK


def test_tt_smi_sees_fewer_chips_than_declared():
    output = with_section(
        N300, "tt-smi", "rc=0", '{"device_info": [{"board_info": {"board_type": "n300 L"}, "firmwares": {}}]}'
    )
    smi = the(judge(output), "tt-smi")
    assert smi.status is CheckStatus.WARN
    assert smi.reason.startswith("tt-smi sees 1 chip(s), the declared boards have 2")


@pytest.mark.parametrize(
    "section, status, fragment",
    [
        (("rc=124",), CheckStatus.FAULT, "did not finish in time"),
        (("rc=0", "Gathering Information..."), CheckStatus.WARN, "printed no JSON snapshot: Gathering Information..."),
        (("rc=2", "tt-smi: error: unrecognized arguments: --snapshot_no_tty"), CheckStatus.WARN, "failed (exit 2)"),
    ],
)
def test_tt_smi_failures(section, status, fragment):
    smi = the(judge(with_section(N300, "tt-smi", *section)), "tt-smi")
    assert smi.status is status and fragment in smi.reason


def test_docker_failures():
    output = with_section(N300, "docker.err", "ok", "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?")
    output = with_section(output, "docker", "rc=1")
    report = judge(output)
    assert the(report, "docker").reason == (
        "the Docker engine is not reachable: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
        "Is the docker daemon running?"
    )
    assert the(report, "disk").status is CheckStatus.SKIP
    assert the(judge(with_section(N300, "docker", "rc=127")), "docker").reason == "the docker CLI is not installed on the host"


def test_disk_threshold_is_configurable():
    config = replace(default_preflight_config(), disk_min_bytes=100 * GIB)
    disk = the(judge(config=config), "disk")
    assert disk.category is EnvCategory.DISK
    assert disk.reason == "only 79.2 GiB free under /var/lib/docker; images need at least 100 GiB"


def test_host_without_boards_only_needs_docker_and_disk():
    report = judge(N300, slots=())
    assert report.ok
    assert [c.name for c in report.checks if c.status is not CheckStatus.SKIP] == ["docker", "disk"]


# ---------------------------------------------------------------------------------------------
# The report and its verdict


def test_verdict_names_every_fault_with_the_first_ones_category():
    report = PreflightReport(
        "wh-01",
        (
            ok("kmd", "tt-kmd 2.3.0"),
            fault("device-busy", EnvCategory.DEVICE_BUSY, "device 0: in use by PID 1 (x)"),
            warn("tt-smi", "odd"),
            fault("hugepages", EnvCategory.HUGEPAGES, "0 reserved"),
        ),
    )
    verdict = report.verdict()
    assert verdict.outcome is Outcome.ENV_FAULT and verdict.category is EnvCategory.DEVICE_BUSY
    assert verdict.message == "host wh-01 failed preflight: device-busy: device 0: in use by PID 1 (x); hugepages: 0 reserved"
    assert [(e.text, e.signature) for e in verdict.evidence] == [
        ("preflight device-busy [device-busy]: device 0: in use by PID 1 (x)", "preflight:device-busy"),
        ("preflight hugepages [hugepages]: 0 reserved", "preflight:hugepages"),
    ]
    assert report.to_json()["checks"][1] == {
        "name": "device-busy", "status": "fault", "reason": "device 0: in use by PID 1 (x)", "category": "device-busy",
    }


def test_a_fault_needs_a_category_and_nothing_else_has_one():
    from harness.core.hostfacts import PreflightCheck

    with pytest.raises(ValueError):
        PreflightCheck("kmd", CheckStatus.FAULT, "x")
    with pytest.raises(ValueError):
        PreflightCheck("kmd", CheckStatus.WARN, "x", EnvCategory.DISK)


# ---------------------------------------------------------------------------------------------
# The threshold catalog


def test_catalog_thresholds_and_their_sources():
    config = default_preflight_config()
    assert config.kmd_minimum == "2.0.0"
    assert config.firmware_minimum == {"wormhole_b0": "18.3.0", "blackhole": "18.5.0"}
    assert set(config.card_types) == set(default_boards())  # every board has its sysfs names
    assert config.disk_min_bytes == 20 * GIB


def test_catalog_errors_are_located(tmp_path):
    from harness.core.configs import config_path

    source = config_path("preflight.yaml").read_text()
    bad = tmp_path / "preflight.yaml"
    bad.write_text(source.replace("  n150: [n150]", "  n15O: [n150]"))
    with pytest.raises(InputError) as caught:
        load_preflight_config(str(bad), default_boards())
    line = next(i for i, l in enumerate(bad.read_text().splitlines(), 1) if l.startswith("  n15O"))
    assert str(caught.value) == f"{bad}:{line}:3: unknown board 'n15O' (did you mean 'n150'?)"
    bad.write_text(source.replace('kmd_minimum: "2.0.0"', 'kmd_minimum: "two"'))
    with pytest.raises(InputError, match="kmd_minimum must be a version like 2.0.0"):
        load_preflight_config(str(bad), default_boards())
    bad.write_text(source.replace('  blackhole: "18.5.0"\n', ""))
    with pytest.raises(InputError, match="firmware_minimum has no entry for blackhole"):
        load_preflight_config(str(bad), default_boards())
