"""Environment faults reported by Tenstorrent's tools other than tt-metal's runtime (issue 10,
classes 1-3: tt-smi/pyluwen/luwen, tt-flash, tt-topology, tt-kmd's installer,
tt-inference-server, a missing docker binary, sysfs permissions; waits that never end), and the
runners' own summaries (configs/summaries.yaml).

Each snippet is a tool's output as it reaches a log, with its surrounding lines: quoted from a
public issue (named), produced here by the real program (Python, pytest, bash, dash, the docker
SDK, a googletest binary), or laid out from the tool's own format strings (named) where no
public log shows that branch. Look-alikes (a test's own PermissionError, an installer's HTTP
404, a tool's version-check bug, another module's dkms failure) must stay real failures.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.core.classifier import classify_log
from harness.core.outcomes import EnvCategory, Outcome
from harness.core.signatures import Severity, anchors, load_catalog
from harness.core.summaries import load_summaries

ROOT = Path(__file__).resolve().parents[1]
CATALOG = load_catalog(ROOT / "configs" / "signatures.yaml")
SUMMARIES = load_summaries(ROOT / "configs" / "summaries.yaml")
E = "\x1b"  # tt-smi and tt-flash color their lines


def lines(text: str) -> list[str]:
    return textwrap.dedent(text).strip("\n").split("\n")


def env_fault(log: list[str], category: EnvCategory, signature: str, **kwargs) -> None:
    verdict = classify_log(log, **kwargs)
    assert (verdict.outcome, verdict.category) == (Outcome.ENV_FAULT, category), verdict.message
    assert verdict.evidence[0].signature == signature, verdict.evidence


def real_failure(log: list[str], **kwargs):
    verdict = classify_log(log, **kwargs)
    assert verdict.outcome is Outcome.FAIL, verdict.message
    return verdict


def test_the_catalogs_load():
    assert len(CATALOG) >= 150 and len(SUMMARIES) >= 20
    waits = {s.id for s in CATALOG if s.severity is Severity.WAIT}
    assert {"luwen-eth-training-wait", "umd-eth-training-wait", "tools-reset-reappear-wait"} <= waits


# ---------------------------------------------------------------------------------------------
# tt-smi and pyluwen: Rust panics when a device cannot be opened

# tt-smi#56 (tt-smi -r with a pyluwen that unwrapped PciDevice::open; Rust >= 1.73 layout)
PANIC_NEW_RUST = lines(
    """
    (.venv) user@wh-01:~$ tt-smi -r 3
    thread '<unnamed>' panicked at crates/pyluwen/src/lib.rs:557:70:
    called `Result::unwrap()` on an `Err` value: DeviceOpenFailed { id: 3, source: Os { code: 2, kind: NotFound, message: "No such file or directory" } }
    stack backtrace:
       0:     0x7610996fa85b - std::backtrace_rs::backtrace::libunwind::trace::h3926e05c1d1f3b6d
                                   at /build/rustc-60UC9b/rustc-1.75.0+dfsg0ubuntu1~bpo0/library/std/src/../../backtrace/src/backtrace/libunwind.rs:104:5
       1:     0x7610996fa85b - std::backtrace_rs::backtrace::trace_unsynchronized::h9f5691494ac25ae6
                                   at /build/rustc-60UC9b/rustc-1.75.0+dfsg0ubuntu1~bpo0/library/std/src/../../backtrace/src/backtrace/mod.rs:66:5
    note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.
    Traceback (most recent call last):
      File "/home/user/.venv/bin/tt-smi", line 8, in <module>
        sys.exit(main())
    pyo3_runtime.PanicException: called `Result::unwrap()` on an `Err` value: DeviceOpenFailed { id: 3, source: Os { code: 2, kind: NotFound, message: "No such file or directory" } }
    """
)

# The same panic from a pyluwen built with Rust < 1.73 (message and location on one line),
# the device node present but not accessible to the container's user
PANIC_OLD_RUST = lines(
    """
    thread '<unnamed>' panicked at 'called `Result::unwrap()` on an `Err` value: DeviceOpenFailed { id: 0, source: Os { code: 13, kind: PermissionDenied, message: "Permission denied" } }', crates/pyluwen/src/lib.rs:557:70
    note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace
    """
)

# tt-smi#164 (tt-smi 3.0.30, pyluwen 0.7.11): the write-combined mapping only warns, the
# uncached one panics; the card needs a KMD reload or a reboot
BAR0_PANIC = lines(
    """
    WARNING: Failed to map bar0_wc for 0 with error Invalid argument (os error 22)

    thread '<unnamed>' panicked at crates/ttkmd-if/src/lib.rs:294:17:
    Failed to map bar0_uc for 0 with error Invalid argument (os error 22)
    stack backtrace:
       0:     0x772deefc6a72 - <std::sys::backtrace::BacktraceLock::print::DisplayBacktrace as core::fmt::Display>::fmt::hf435e8e9347709a8
       1:     0x772deefe8923 - core::fmt::write::h0a51fad3804c5e7c
      11:     0x772deef543c9 - ttkmd_if::PciDevice::open::h7c2f7b1e0d3a9f10
    """
)

# pyluwen since luwen#59: the PciOpenError as a Python exception, its cause on the next line
OPEN_ERROR_KMD_TOO_OLD = lines(
    """
    Traceback (most recent call last):
      File "/usr/local/bin/tt-flash", line 8, in <module>
        sys.exit(main())
    Exception: Could not open chip on pci interface 0
     Failed with: Unsupported driver version: v1, please upgrade to >=2
    """
)


@pytest.mark.parametrize(
    "log, category, signature",
    [
        (PANIC_NEW_RUST, EnvCategory.DEVICE_MISSING, "pyluwen-panic-device-open"),
        (PANIC_OLD_RUST, EnvCategory.DEVICE_MISSING, "pyluwen-panic-device-open"),
        (BAR0_PANIC, EnvCategory.DEVICE_HANG, "smi-bar0-map-failed"),
        (OPEN_ERROR_KMD_TOO_OLD, EnvCategory.DRIVER_VERSION, "luwen-kmd-too-old"),
    ],
    ids=["tt-smi#56", "old-rust-panic", "tt-smi#164", "pyluwen-open-error"],
)
def test_pyluwen_device_open_failures(log, category, signature):
    env_fault(log, category, signature)


def test_the_bar0_wc_warning_alone_decides_nothing():
    verdict = classify_log([BAR0_PANIC[0], "[  PASSED  ] 3 tests."])
    assert verdict.outcome is Outcome.PASS
    assert [e.signature for e in verdict.evidence] == [None, "luwen-bar0-wc-map-warning"]


# ---------------------------------------------------------------------------------------------
# luwen chip initialization: ARC / DRAM / ETH status of a chip that did not come up

# tt-metal#20258 (tt-smi -r on a Blackhole host; tt-tools-common's TTY progress, then luwen's table)
SMI_RESET_ARC_TIMEOUT = lines(
    """
    (python_env) abhullar@bh-38-special:/localdev/abhullar/tt-metal$ tt-smi -r 0,1
     Starting PCI link reset on BH devices at PCI indices: 0, 1 
    Waiting for up to 2 seconds for asic to come back after reset
     Config space reset completed for device 0 
     Config space reset completed for device 1 
     Finishing PCI link reset on BH devices at PCI indices: 0, 1 
     Re-initializing boards after reset.... 
     Detected Chips: 2
     Detecting ARC: /
     Detecting DRAM: /
     [] [14/14] ETH: /
     Error when re-initializing chips!
     Chip initialization failed:
       Communication Status: Success
       DRAM Status: In Progress, 8 out of 8 initialized
       CPU Status: In Progress, 4 out of 4 initialized
       ARC Status: Timeout, 0 out of 1 initialized
       Ethernet Status: In Progress, 14 out of 14 initialized
       Noc Safe: false
       Unknown State: false
     
       0: luwen_if::chip::init::wait_for_init
       1: luwen_if::detect_chips::detect_chips
       2: pyluwen::detect_chips_fallible
    """
)

# tt-metal#22573 (tt-flash on a Galaxy): DRAM "Timeout, 4 out of 4" is all trained; ARC is the cause
FLASH_ARC_TIMEOUT = lines(
    """
    Stage: SETUP
    Stage: DETECT
    Exception: Chip initialization failed:
       Communication Status: Success
       DRAM Status: Timeout, 4 out of 4 initialized
       CPU Status: Timeout
       ARC Status: Timeout, 0 out of 1 initialized
       Ethernet Status: In Progress, 16 out of 16 initialized
    """
)

# tt-flash#111 (a Blackhole Galaxy): every line "In Progress", ARC stuck at 0 of 1
FLASH_ARC_STUCK = lines(
    """
    local-syseng@bh-glx-b02u08:~/joel$ uvx tt-flash@latest flash --download
    Installed 35 packages in 18ms
    Stage: SETUP
    \tDownloading fw_pack-19.13.2.fwbundle... 100%  5440 / 5440 KB
    Stage: DETECT
    Error: Chip initialization failed:
       Communication Status: Success
       DRAM Status: In Progress, 8 out of 8 initialized
       CPU Status: In Progress, 4 out of 4 initialized
       ARC Status: In Progress, 0 out of 1 initialized
       Ethernet Status: In Progress, 14 out of 14 initialized
       Noc Safe: true
       Unknown State: false
    """
)

# tt-metal#20517 (tt-smi -r on a T3000): the init aborted with its error on the first line
SMI_RESET_ABORTED = lines(
    """
    tt-smi -r 0,1,2,3
     Starting PCI link reset on WH devices at PCI indices: 0, 1, 2, 3 
     Finishing PCI link reset on WH devices at PCI indices: 0, 1, 2, 3 
     Re-initializing boards after reset.... 
     Detected Chips: 5
     Error when re-initializing chips!
     Chip initialization failed (aborted): Destination Unreachable. 
       Communication Status: Success
       DRAM Status: In Progress, 0 out of 4 initialized
       CPU Status: Timeout
       ARC Status: In Progress, 0 out of 1 initialized
       Ethernet Status: In Progress, 0 out of 16 initialized
       Noc Safe: false
       Unknown State: false
    """
)

# luwen's table when ETH links never train (laid out from crates/luwen-api/src/chip/init/
# status.rs InitStatus Display: a Wormhole with 2 of 16 ports untrained when the timeout hit)
FLASH_ETH_TIMEOUT = lines(
    """
    Stage: SETUP
    Stage: DETECT
    Error: Chip initialization failed:
       Communication Status: Success
       DRAM Status: In Progress, 6 out of 6 initialized
       CPU Status: In Progress
       ARC Status: In Progress, 1 out of 1 initialized
       Ethernet Status: Timeout, 14 out of 16 initialized
       Noc Safe: false
       Unknown State: false
    """
)

# luwen's ErrorContinue form (chip/wormhole.rs): the error on the "failed:" line itself
FLASH_ETH_INCOMPLETE = lines(
    """
    Stage: DETECT
    Error: Chip initialization failed: Ethernet training not complete on [2/16] ports 
       Communication Status: Success
       ARC Status: In Progress, 1 out of 1 initialized
       Ethernet Status: In Progress, 14 out of 16 initialized
    """
)


@pytest.mark.parametrize(
    "log, category, signature",
    [
        (SMI_RESET_ARC_TIMEOUT, EnvCategory.FIRMWARE, "luwen-init-arc-incomplete"),
        (FLASH_ARC_TIMEOUT, EnvCategory.FIRMWARE, "luwen-init-arc-incomplete"),
        (FLASH_ARC_STUCK, EnvCategory.FIRMWARE, "luwen-init-arc-incomplete"),
        (SMI_RESET_ABORTED, EnvCategory.DEVICE_HANG, "luwen-chip-init-failed"),
        (FLASH_ETH_TIMEOUT, EnvCategory.ETH_LINK, "luwen-init-eth-timeout"),
        (FLASH_ETH_INCOMPLETE, EnvCategory.ETH_LINK, "luwen-eth-training-incomplete"),
    ],
    ids=["tt-metal#20258", "tt-metal#22573", "tt-flash#111", "tt-metal#20517", "eth-timeout-table", "eth-incomplete"],
)
def test_luwen_chip_init_reports(log, category, signature):
    env_fault(log, category, signature)


def test_a_report_whose_table_names_no_component_is_still_a_chip_that_did_not_come_up():
    # Blackhole's CPU line carries no count luwen-init-* could name: the wrapper decides
    log = ["Error: Chip initialization failed:", "   Communication Status: Success", "   CPU Status: Timeout", "   ARC Status: In Progress, 1 out of 1 initialized"]
    env_fault(log, EnvCategory.DEVICE_HANG, "luwen-chip-init-report")


def test_a_timed_out_status_line_with_everything_initialized_is_not_the_cause():
    for line in ("   DRAM Status: Timeout, 4 out of 4 initialized", "   Ethernet Status: Timeout, 16 out of 16 initialized"):
        assert not [s for s in CATALOG.match_line(line) if s.fatal]


# The known issue: "Error in detecting devices!" and the ARC timeout it wraps on one line (a
# JSON record, or a pytest summary of an exception message). The ARC timeout is the truer cause:
# the wrapper only says detection failed, and it is ordered last.
ARC_TIMEOUT = "Timed out after waiting 1000 ms for ARC to respond. Message code 0xaa30 with arguments 0x0 and 0x0"


def test_the_arc_timeout_names_a_line_it_shares_with_tt_smis_detect_error():
    one_line = '{"tool": "tt-smi", "stdout": " Error in detecting devices!\\n' + ARC_TIMEOUT + '\\n Exiting..."}'
    ids = [s.id for s in CATALOG.match_line(one_line)]
    assert ids == ["umd-arc-message-timeout", "smi-detect-error"]  # catalog order: the cause first
    env_fault([one_line], EnvCategory.DEVICE_HANG, "umd-arc-message-timeout")
    # as tt-smi prints it (tt_smi.py main: print(RED, f"Error in detecting devices!\n{e}\n Exiting...", ENDC))
    printed = f"{E}[91m Error in detecting devices!\n{ARC_TIMEOUT}\n Exiting... {E}[0m".split("\n")
    env_fault(printed, EnvCategory.DEVICE_HANG, "umd-arc-message-timeout")


# tt-smi prints its wrapper BEFORE the cause ("Error in detecting devices!\n{e}"): the wrappers
# are waits, so the cause on a later line decides, and with no catalogued cause after it the run
# still ends an env fault of the wrapper's category.
@pytest.mark.parametrize(
    "log, category, signature",
    [
        (
            [" Error in detecting devices!", "Failed to open device /dev/tenstorrent/0: Permission denied", " Exiting..."],
            EnvCategory.DEVICE_MISSING,
            "umd-open-device-failed",
        ),
        ([" Error in detecting devices!", *FLASH_ETH_TIMEOUT[2:], " Exiting..."], EnvCategory.ETH_LINK, "luwen-init-eth-timeout"),
        ([" Error in detecting devices!", "Something tt-smi has never said before", " Exiting..."], EnvCategory.DEVICE_HANG, "smi-detect-error"),
        ([" Error when re-initializing chips!", " unexpected status 0x7", ""], EnvCategory.DEVICE_HANG, "smi-reinit-failed"),
    ],
    ids=["open-denied", "eth-timeout", "unknown-cause", "reinit-unknown-cause"],
)
def test_the_cause_after_a_tt_smi_wrapper_decides(log, category, signature):
    env_fault(log, category, signature)
    assert classify_log(log, exit_code=1).category is category


# ---------------------------------------------------------------------------------------------
# tt-smi: firmware refusals, reset failures, driver checks

# tt-smi 1.x-3.x check_fw_version (removed in c635129): print(RED, f"Unsupported ...", f"\n Require ...", ENDC)
SMI_OLD_FW = [
    f"{E}[31m Unsupported FW version 1.2.0.0 detected on Grayskull device 0. ",
    f" Require FW version >= 1.3.0.0 to run tt-smi {E}[0m",
    f"{E}[31m Please update FW on device using tt-flash: https://github.com/tenstorrent/tt-flash {E}[0m",
]

# tt-tools-common chip_reset.py full_lds_reset (tt-smi -r --use_luwen)
SMI_RESET_TIMEOUT = lines(
    """
    $ tt-smi -r 0 --use_luwen
     Starting reset on devices at PCI indices: 0 
     Waiting for 2 seconds for potential hotplug removal. 
     Waiting for devices to reappear on pci bus... 
     Timeout waiting for device at PCI index 0 to reappear. 
    """
)

# tt-tools-common check_driver_version (tuple comparison, current)
SMI_KMD_TOO_OLD = lines(
    """
    Current driver version: 2.3.0
    Operation 'reset' requires Tenstorrent driver version 2.4.1 or greater. Your version is too old.
    Please update your driver using tt-kmd: https://github.com/tenstorrent/tt-kmd
    """
)


@pytest.mark.parametrize(
    "log, category, signature",
    [
        (SMI_OLD_FW, EnvCategory.FIRMWARE, "smi-fw-unsupported"),
        (SMI_RESET_TIMEOUT, EnvCategory.DEVICE_HANG, "tools-reset-failed"),
        (SMI_KMD_TOO_OLD, EnvCategory.DRIVER_VERSION, "tools-kmd-too-old"),
        ([" Error in resetting galaxy 6u trays!", "Driver not loaded with 32 devices after 100 seconds... giving up", " Exiting..."], EnvCategory.DEVICE_HANG, "tools-reset-failed"),
        (["Device does not exist: /sys/bus/pci/devices/0000:05:00.0"], EnvCategory.DEVICE_MISSING, "smi-bdf-missing"),
    ],
    ids=["old-firmware", "reset-timeout", "kmd-too-old", "galaxy-reset", "bdf-missing"],
)
def test_tt_smi_faults(log, category, signature):
    env_fault(log, category, signature)


def test_a_reset_killed_while_the_board_has_not_reappeared_is_a_hang():
    killed = SMI_RESET_TIMEOUT[:4] + ["timeout: sending signal TERM to command ‘tt-smi’"]
    verdict = classify_log(killed)
    assert (verdict.outcome, verdict.category) == (Outcome.ENV_FAULT, EnvCategory.DEVICE_HANG)
    assert "still waiting" in verdict.message and verdict.evidence[0].signature == "tools-reset-reappear-wait"
    assert classify_log(SMI_RESET_TIMEOUT[:4], exit_code=0).outcome is Outcome.PASS  # the reset went on


def test_a_1x_kmd_refused_by_either_check_is_a_driver_fault():
    # the old check's wording with a KMD that really is too old (1.23 < 1.26)
    old = [" Current driver version: 1.23 ", " This script requires driver version to be greater than 1.26, not continuing with board reset "]
    env_fault(old, EnvCategory.DRIVER_VERSION, "tools-kmd-1x-refused")


def test_tt_smis_version_check_bug_is_not_a_driver_fault():
    # tt-smi#110: tt-smi 3.0.19 refused KMD 2.0.0 by comparing minor numbers only
    log = lines(
        """
        (venv) joel@sjc-lab-t7003 ~/git/tt-smi $ tt-smi -r0
         Current driver version: 2.0.0 
         This script requires driver version to be greater than 1.26, not continuing with board reset 
         Please install correct driver version using tt-kmd: https://github.com/tenstorrent/tt-kmd 
        """
    )
    verdict = real_failure(log)
    assert "tools-kmd-version-check-bug" in [e.signature for e in verdict.evidence]


# ---------------------------------------------------------------------------------------------
# tt-flash and tt-topology

# tt-flash's stages and its "Error: {e}" (tt_flash/main.py), the refusal from flash.py
FLASH_DOWNGRADE = lines(
    """
    Stage: SETUP
    Stage: DETECT
    Stage: FLASH
    \tSub Stage: VERIFY
    \t\tVerifying fw-package can be flashed: complete
    \t\tFlashing devices, this might take a minute... ✓
    Error: Detected major version downgrade from (19, 4, 0, 0) to (18, 12, 0, 0), this is not supported. If you really want to do this please re-run with --allow-major-downgrades 
    """
)
FLASH_NO_DEVICES = ["Stage: SETUP", "Stage: DETECT", f"FLASH {E}[31mFAILED{E}[0m: No devices available to flash."]
FLASH_ERRORS = ["\t\tFlashing devices, this might take a minute... ✓", "\t\tErrors detected during flash, skipping automatic reset...", f"FLASH {E}[31mFAILED{E}[0m"]

# tt-topology -l mesh on an n300 LoudBox whose remote chips did not come back (laid out from
# tt_topology.py's own prints, tt-topology@47688f75)
TOPOLOGY_BOARDS_MISSING = lines(
    """
     Starting flash on pcie chips to default state. 
     Sleeping for 15s ... 
     Finished flashing pcie chips to default state. 
     Initiating reset on chips at pcie interface: [0, 1, 2, 3] 
     Completed reset on 4 chips 
     Post reset detected : 7 chips 
     NOT ALL BOARDS DETECTED!, detected 7, expecting 8 
    """
)


@pytest.mark.parametrize(
    "log, category, signature",
    [
        (FLASH_DOWNGRADE, EnvCategory.FIRMWARE, "flash-refused"),
        (FLASH_NO_DEVICES, EnvCategory.DEVICE_MISSING, "flash-no-devices"),
        (FLASH_ERRORS, EnvCategory.FIRMWARE, "flash-errors-during-flash"),
        (TOPOLOGY_BOARDS_MISSING, EnvCategory.ETH_LINK, "topology-boards-missing"),
        (
            [" Generated connection map: ", " Error: Detected 2 missing physical connection(s) for mesh layout! It's possible cables are loose or missing. "],
            EnvCategory.ETH_LINK,
            "topology-missing-connections",
        ),
    ],
    ids=["downgrade-refused", "no-devices", "flash-errors", "boards-missing", "mesh-connections"],
)
def test_tt_flash_and_tt_topology_faults(log, category, signature):
    env_fault(log, category, signature)


def test_tt_flash_success_and_look_alikes():
    assert classify_log(["Stage: FLASH", "\t\tFlashing devices, this might take a minute... ✓", f"FLASH {E}[32mSUCCESS{E}[0m"]).outcome is Outcome.PASS
    # a wrong bundle path is the caller's mistake, not the card's
    real_failure(["Opening of fw_pack-19.4.0.fwbundle failed with - [Errno 2] No such file or directory: 'fw_pack-19.4.0.fwbundle'", "", "---", "usage: tt-flash [-h] [-v]"])
    # tt-topology's linear/torus layouts carry on past missing cables
    warned = [" Warning: Detected 1 missing physical connection(s) for mesh layout! It's possible cables are loose or missing. ", " Saved json log file to ~/tt_topology_logs/2026-08-21_log.json "]
    assert classify_log(warned, exit_code=0).outcome is Outcome.PASS


# ---------------------------------------------------------------------------------------------
# tt-kmd's installer: dkms and modprobe

# dkms's own wording (public dkms logs of other modules show the same lines), tt-kmd's module name
DKMS_BUILD_FAILED = lines(
    """
    $ sudo dkms install tenstorrent/1.29
    Creating symlink /var/lib/dkms/tenstorrent/1.29/source -> /usr/src/tenstorrent-1.29

    Building module:
    Cleaning build area...
    make -j16 KERNELRELEASE=6.8.0-49-generic -C /lib/modules/6.8.0-49-generic/build M=/var/lib/dkms/tenstorrent/1.29/build...(bad exit status: 2)
    Error! Bad return status for module build on kernel: 6.8.0-49-generic (x86_64)
    Consult /var/lib/dkms/tenstorrent/1.29/build/make.log for more information.
    """
)


@pytest.mark.parametrize(
    "log, signature",
    [
        (DKMS_BUILD_FAILED, "kmd-dkms-build-failed"),
        (["$ sudo modprobe tenstorrent", "modprobe: FATAL: Module tenstorrent not found in directory /lib/modules/6.8.0-49-generic"], "kmd-modprobe-not-found"),
        (["$ sudo modprobe tenstorrent", "modprobe: FATAL: Module tenstorrent not found."], "kmd-modprobe-not-found"),
        (["$ sudo modprobe tenstorrent", "modprobe: ERROR: could not insert 'tenstorrent': Key was rejected by service"], "kmd-insert-failed"),
        (["insmod: ERROR: could not insert module /lib/modules/6.8.0-49-generic/updates/dkms/tenstorrent.ko: Invalid module format"], "kmd-insert-failed"),
    ],
    ids=["dkms-build", "modprobe-not-found", "modprobe-not-found-old", "secure-boot", "insmod-format"],
)
def test_tt_kmd_install_failures(log, signature):
    env_fault(log, EnvCategory.DRIVER_MISSING, signature)


def test_installer_look_alikes_stay_real_failures():
    # another module's dkms build
    other = [line.replace("tenstorrent", "nvidia").replace("1.29", "550.120") for line in DKMS_BUILD_FAILED]
    real_failure(other)
    # tt-installer building a firmware URL that does not exist (HTTP 404), tt-installer install.m4
    real_failure(
        [
            "[INFO] Updating firmware",
            "curl: (22) The requested URL returned error: 404",
            "[WARNING] Tried URL https://github.com/tenstorrent/tt-firmware/releases/download/v19.44.0/fw_pack-19.44.0.fwbundle",
            "[WARNING] Could not find firmware bundle at main URL- trying backup URL",
            "curl: (22) The requested URL returned error: 404",
            "[ERROR] Could not download firmware bundle. Ensure firmware version is valid.",
        ]
    )


# ---------------------------------------------------------------------------------------------
# tt-inference-server's workflows

TIS = "2026-08-20 10:00:00,000 - "  # workflows/log_setup.py: "%(asctime)s - %(filename)s:%(lineno)d - %(levelname)s: %(message)s"
# laid out from workflows/run_docker_server.py ensure_docker_image's log calls and run.py's assert
TIS_NO_IMAGE = [
    TIS + "run_docker_server.py:160 - INFO: running: docker pull ghcr.io/tenstorrent/tt-inference-server/vllm-tt-metal-src-release-ubuntu-22.04-amd64:0.0.5",
    TIS + "run_docker_server.py:161 - INFO: this may take several minutes ...",
    TIS + "run_docker_server.py:165 - ERROR: ⛔ Docker image pull from ghcr.io failed with return code: 1",
    TIS + "run_docker_server.py:166 - INFO: Attempting to run image from local images ...",
    TIS + "run_docker_server.py:181 - ERROR: ⛔ Docker image does not exist locally.",
    "Traceback (most recent call last):",
    '  File "/home/user/tt-inference-server/run.py", line 1224, in <module>',
    "AssertionError: Docker image: ghcr.io/tenstorrent/tt-inference-server/vllm-tt-metal-src-release-ubuntu-22.04-amd64:0.0.5 not found on GHCR or locally.",
]


@pytest.mark.parametrize(
    "log, category, signature",
    [
        (TIS_NO_IMAGE, EnvCategory.IMAGE, "tis-docker-image-missing"),
        ([TIS + "run.py:702 - INFO: Inferring --tt-device from tt-smi", "ValueError: Invalid tt-smi chip count for n300: 3. Expected an even number of chips (L/R pairs)."], EnvCategory.ETH_LINK, "tis-odd-chip-count"),
        ([TIS + "run_system_software_validation.py:73 - ERROR: tt-smi -s command timed out after 10 seconds"], EnvCategory.DEVICE_HANG, "tis-tt-smi-timeout"),
        ([TIS + "run_multihost_validation.py:360 - ERROR: ❌ TT device /dev/tenstorrent on wh-02: FAILED"], EnvCategory.DEVICE_MISSING, "tis-device-node-missing"),
        (["Traceback (most recent call last):", "RuntimeError: tt-smi command not found"], EnvCategory.DRIVER_MISSING, "tis-tt-smi-missing"),
        # run_system_software_validation.py enforce_version_requirement / the topology check
        (["Traceback (most recent call last):", "ValueError: FW bundle version '18.2.0' does not satisfy the STRICT requirement '>=18.6.0'. If you want to skip this check, re-run with --skip-system-sw-validation."], EnvCategory.FIRMWARE, "tis-version-requirement"),
        (["Traceback (most recent call last):", "ValueError: KMD version '1.33.0' does not satisfy the STRICT requirement '>=2.0.0'. If you want to skip this check, re-run with --skip-system-sw-validation."], EnvCategory.DRIVER_VERSION, "tis-kmd-requirement"),
        (["Traceback (most recent call last):", "ValueError: ModelSpec requires a system-level topology of SystemTopology.MESH, detected SystemTopology.ISOLATED"], EnvCategory.ETH_LINK, "tis-topology-requirement"),
    ],
    ids=["image-missing", "odd-chip-count", "tt-smi-timeout", "device-node", "tt-smi-missing", "fw-requirement", "kmd-requirement", "topology"],
)
def test_tt_inference_server_faults(log, category, signature):
    env_fault(log, category, signature)


def test_a_suggested_requirement_only_warns():
    line = TIS + "run_system_software_validation.py:222 - WARNING: FW bundle version '18.2.0' does not satisfy the SUGGESTED requirement '>=18.6.0'. If you want to skip this check, re-run with --skip-system-sw-validation."
    assert classify_log([line, TIS + "run.py:1205 - INFO: Completed run.py."]).outcome is Outcome.PASS


def test_tt_inference_servers_own_verdict():
    ran = [TIS + "run.py:1186 - INFO: Model Llama-3.1-8B-Instruct (model_type=LLM) routes through the workflow engine."]
    assert classify_log(ran + [TIS + "run.py:1205 - INFO: Completed run.py."]).outcome is Outcome.PASS
    assert classify_log(ran + ["2025-08-29 12:00:00,123 - run.py:390 - INFO: ✅ Completed run.py successfully."]).outcome is Outcome.PASS
    real_failure(ran + [TIS + "run.py:1207 - ERROR: run.py failed (rc=1). See logs above for details."])


# ---------------------------------------------------------------------------------------------
# A missing docker binary, produced by the real programs

NO_DOCKER_ENV = {"PATH": "/nonexistent", "LANG": "C.UTF-8"}


def run_without_docker(argv: list[str]) -> list[str]:
    result = subprocess.run(argv, env=NO_DOCKER_ENV, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    return (result.stdout + result.stderr).splitlines()


@pytest.mark.parametrize(
    "argv",
    [
        [shutil.which("bash") or "/bin/bash", "-c", "docker pull ghcr.io/tenstorrent/tt-metal/tt-metalium/ubuntu-22.04-dev-amd64"],
        [shutil.which("dash") or "/bin/sh", "-c", "docker version"],
        [sys.executable, "-c", "import subprocess; subprocess.run(['docker', 'run', '--rm', 'tt-metalium'])"],
    ],
    ids=["bash", "dash", "python-subprocess"],
)
def test_a_missing_docker_binary_is_a_docker_fault(argv):
    env_fault(run_without_docker(argv), EnvCategory.DOCKER, "docker-binary-missing")


def test_the_docker_sdk_without_an_engine_is_a_docker_fault():
    import docker  # the SDK the harness itself uses

    with pytest.raises(docker.errors.DockerException) as raised:
        docker.DockerClient(base_url="unix:///nonexistent/docker.sock", version="auto")
    line = f"docker.errors.DockerException: {raised.value}"
    env_fault(["Traceback (most recent call last):", line], EnvCategory.DOCKER, "docker-daemon-unreachable")


# ---------------------------------------------------------------------------------------------
# sysfs permissions and read-only mounts

def oserror(errno: int, strerror: str, path: str, cls: type[OSError] = OSError) -> str:
    # CPython's own str() of the exception, as a traceback's last line shows it
    return f"{cls.__name__}: {cls(errno, strerror, path)}"


SYSFS_LINES = [
    oserror(13, "Permission denied", "/sys/bus/pci/devices/0000:05:00.0/reset", PermissionError),
    oserror(30, "Read-only file system", "/sys/bus/pci/rescan"),
    oserror(1, "Operation not permitted", "/sys/class/tenstorrent/tenstorrent!0/tt_aiclk", PermissionError),
    "sh: 1: cannot create /sys/bus/pci/devices/0000:05:00.0/remove: Permission denied",
    "tee: /sys/bus/pci/devices/0000:05:00.0/reset: Read-only file system",
    "bash: /sys/bus/pci/rescan: Permission denied",
    "  what():  filesystem error: directory iterator cannot open directory: No such file or directory [/sys/bus/pci/slots]",
    "Failed to open config space for device 0 with error Permission denied (os error 13)",
    "Failed to write into device 0 config space[offset: 4, size: 2]; Failed with Nix error: EACCES: Permission denied",
    # luwen DeviceInfo::pcie_link_width's unwrap of /sys/bus/pci/devices/<bdf>/current_link_width
    "thread 'main' panicked at crates/luwen-api/src/interface.rs:94:14:",
]


@pytest.mark.parametrize("line", SYSFS_LINES)
def test_sysfs_permission_faults(line):
    log = ["Traceback (most recent call last):", '  File "/usr/local/bin/reset_card.py", line 12, in <module>', line]
    verdict = classify_log(log)
    assert (verdict.outcome, verdict.category) == (Outcome.ENV_FAULT, EnvCategory.SYSFS), verdict.message


def test_a_tests_own_permission_error_stays_a_real_failure(tmp_path):
    # a real pytest run of a test whose own code hits EACCES outside sysfs
    (tmp_path / "test_cache.py").write_text(
        "def test_write_cache():\n"
        "    raise PermissionError(13, 'Permission denied', '/tmp/cache/out.bin')\n"
        "def test_read_debugfs():\n"
        "    raise PermissionError(13, 'Permission denied', '/sys/kernel/debug/tenstorrent/0/mappings')\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert "2 failed" in result.stdout
    verdict = real_failure(result.stdout.splitlines())
    assert not [e for e in verdict.evidence if e.signature]


# ---------------------------------------------------------------------------------------------
# Waits that never end

ETH_WAIT = "[2;3;4;5;6;7;8;9;10;11;12;13;14;15]: [0, 0, 0, 0]: Waiting for initial training to complete"
# tt-metal#6566 (a T3000 whose port 14 never trained; fixed by reseating cables)
ETH_WAIT_2024 = [
    "Waiting for ethernet ports to train on chip [1, 0, 0, 0].",
    "[0; [1, 0, 0, 0]] Still waiting... {0: True, 1: True, 2: True, 3: True, 4: True, 5: True, 6: True, 7: True, 8: True, 9: True, 10: True, 11: True, 12: True, 13: True, 14: False, 15: True}",
]
UMD_ETH_WAIT = "2026-08-21 10:00:00.000 | debug    |             UMD | Waiting on ethernet link training on device: 0 (topology_discovery.cpp:607)"


@pytest.mark.parametrize(
    "log, category, signature",
    [
        (["Initializing chip...", "\t(240/300) [2/16] ETH", ETH_WAIT, "Killed"], EnvCategory.ETH_LINK, "luwen-eth-training-wait"),
        ([" Detected Chips: 1", f" {E}[95m[240/300]{E}[94m\t [2/16] ETH: {E}[93m/{E}[0m", "Terminated"], EnvCategory.ETH_LINK, "tools-eth-detect-wait"),
        (["$ ./build/test/tt_metal/unit_tests_eth", UMD_ETH_WAIT, "timeout: sending signal TERM to command ‘unit_tests_eth’"], EnvCategory.ETH_LINK, "umd-eth-training-wait"),
        ([" Detected Chips: 1", " Detecting ARC: /", "Killed"], EnvCategory.DEVICE_HANG, "tools-arc-detect-wait"),
        ([*ETH_WAIT_2024, "##[error]The operation was canceled."], EnvCategory.ETH_LINK, "luwen-eth-ports-wait"),
        (["⠐ Detecting chips (found 12)", "⠖ Initializing Chip", "⠒ Initializing Chip", "Terminated"], EnvCategory.DEVICE_HANG, "luwen-chip-init-wait"),
    ],
    ids=["luwen", "tt-tools-common-tty", "umd", "arc", "tt-metal#6566", "luwen-spinner"],
)
def test_a_run_killed_while_still_waiting_is_the_waits_fault(log, category, signature):
    verdict = classify_log(log)
    assert (verdict.outcome, verdict.category) == (Outcome.ENV_FAULT, category), verdict.message
    assert "still waiting" in verdict.message and verdict.evidence[0].signature == signature


@pytest.mark.parametrize(
    "line, signature",
    [
        ("Timed out after 300.000412s seconds while waiting for ethernet links to train.", "luwen-eth-train-timeout-panic"),
        ("Device 3 timed out waiting for ethernet channel 7 to train", "umd-eth-channel-train-timeout"),
    ],
)
def test_eth_training_that_gave_up_is_an_eth_link_fault(line, signature):
    env_fault([*ETH_WAIT_2024, line], EnvCategory.ETH_LINK, signature)


def test_a_wait_that_ended_decides_nothing():
    run = "[ RUN      ] EthernetTest.SendRecv"
    ok = ["[       OK ] EthernetTest.SendRecv (812 ms)", "[  PASSED  ] 1 test."]
    assert classify_log([UMD_ETH_WAIT, run, *ok]).outcome is Outcome.PASS
    failed = classify_log([UMD_ETH_WAIT, run, "eth_test.cpp:40: Failure", "Value of: received == sent", "[  FAILED  ] EthernetTest.SendRecv (900 ms)"])
    assert failed.outcome is Outcome.FAIL


# ---------------------------------------------------------------------------------------------
# Runners' own summaries (configs/summaries.yaml)


def test_every_summary_is_specific_and_its_example_gives_its_verdict():
    passes = [s for s in SUMMARIES if s.verdict is Outcome.PASS]
    fails = [s for s in SUMMARIES if s.verdict is Outcome.FAIL]
    for summary in SUMMARIES:
        assert summary.pattern.search(summary.example)
        assert all(len(anchor) >= 4 for anchor in anchors(summary.pattern))
        assert classify_log(["$ run-tests", summary.example]).outcome is summary.verdict, summary.id
    # no pass pattern accepts a fail example, and no fail pattern a pass example
    for passing in passes:
        assert not [f.id for f in fails if f.pattern.search(passing.example)], passing.id
    for failing in fails:
        assert not [p.id for p in passes if p.pattern.search(failing.example)], failing.id


@pytest.mark.parametrize(
    "log, outcome",
    [
        (["Test project /work/build", "12/12 Test #12: ttml_layernorm_bw .........   Passed    3.10 sec", "", "100% tests passed, 0 tests failed out of 12", "", "Total Test time (real) =  41.22 sec"], Outcome.PASS),
        (["11/12 Test #11: ttml_layernorm_bw .........***Failed    3.10 sec", "92% tests passed, 1 tests failed out of 12"], Outcome.FAIL),
        (["running 3 tests", "test ops::add ... ok", "", "test result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s"], Outcome.PASS),
        (["test ops::add ... FAILED", "", "test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s"], Outcome.FAIL),
        (["=== RUN   TestInventory", "--- PASS: TestInventory (0.00s)", "PASS", "ok  \tgithub.com/tenstorrent/lab/inventory\t0.012s"], Outcome.PASS),
        (["--- FAIL: TestInventory (0.00s)", "FAIL", "FAIL\tgithub.com/tenstorrent/lab/inventory\t0.015s"], Outcome.FAIL),
        (["===============================================================================", "All tests passed (42 assertions in 7 test cases)"], Outcome.PASS),
        (["===============================================================================", "test cases: 7 | 6 passed | 1 failed", "assertions: 42 | 41 passed | 1 failed"], Outcome.FAIL),
        (["[doctest] test cases:  40 |  40 passed | 0 failed | 0 skipped", "[doctest] assertions: 253 | 253 passed | 0 failed |", "[doctest] Status: SUCCESS!"], Outcome.PASS),
        (["[doctest] test cases: 40 | 39 passed | 1 failed | 0 skipped", "[doctest] Status: FAILURE!"], Outcome.FAIL),
        (["Step: 5000, Loss: 1.0987", "Full step time 210.3 ms, cache entries: 61", "5000 Steps training time: 1843.27 s, cache entries: 61"], Outcome.PASS),
        (["========================== 3 passed in 0.12 seconds ==========================="], Outcome.PASS),
    ],
    ids=["ctest", "ctest-failed", "cargo", "cargo-failed", "go", "go-failed", "catch2", "catch2-failed", "doctest", "doctest-failed", "tt-train", "pytest-old"],
)
def test_runners_summaries_decide(log, outcome):
    assert classify_log(log).outcome is outcome


def test_a_summary_never_hides_an_environment_fault():
    ctest_passed = "100% tests passed, 0 tests failed out of 12"
    env_fault([*FLASH_NO_DEVICES, ctest_passed], EnvCategory.DEVICE_MISSING, "flash-no-devices")
    env_fault([PANIC_OLD_RUST[0], ctest_passed], EnvCategory.DEVICE_MISSING, "pyluwen-panic-device-open")


def test_python_unittests_own_summary(tmp_path):
    (tmp_path / "test_ops.py").write_text(
        "import unittest\n"
        "class Ops(unittest.TestCase):\n"
        "    def test_add(self): self.assertEqual(1 + 1, 2)\n"
        "    @unittest.skip('no card')\n"
        "    def test_card(self): pass\n"
    )
    passed = subprocess.run([sys.executable, "-m", "unittest", "test_ops"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert passed.returncode == 0 and "OK (skipped=1)" in passed.stderr
    assert classify_log(passed.stderr.splitlines()).outcome is Outcome.PASS
    (tmp_path / "test_ops.py").write_text("import unittest\nclass Ops(unittest.TestCase):\n    def test_add(self): self.assertEqual(1 + 1, 3)\n")
    failed = subprocess.run([sys.executable, "-m", "unittest", "test_ops"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert failed.returncode == 1 and "FAILED (failures=1)" in failed.stderr
    assert classify_log(failed.stderr.splitlines()).outcome is Outcome.FAIL


@pytest.mark.parametrize("quiet", [[], ["-q"]], ids=["default", "quiet"])
def test_pytests_colored_summaries(tmp_path, quiet):
    (tmp_path / "test_ok.py").write_text("import pytest\ndef test_a(): pass\n@pytest.mark.skip\ndef test_b(): pass\n")
    (tmp_path / "test_bad.py").write_text("def test_c(): pass\ndef test_d(): assert 0\n")
    (tmp_path / "test_warn.py").write_text("import warnings\ndef test_e(): warnings.warn('old', DeprecationWarning)\n")

    def summary_line(name: str) -> str:
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--color=yes", *quiet, name],
            cwd=tmp_path, capture_output=True, text=True, timeout=120,
        )
        return result.stdout.rstrip("\n").split("\n")[-1]

    passed, warned, failed = summary_line("test_ok.py"), summary_line("test_warn.py"), summary_line("test_bad.py")
    assert E in passed and E in warned and E in failed  # colored, as CI logs with --color=yes show them
    assert classify_log([passed]).outcome is Outcome.PASS
    assert classify_log([warned]).outcome is Outcome.PASS
    assert classify_log([failed]).outcome is Outcome.FAIL


def test_a_real_gtest_brief_binary(tmp_path):
    # googletest --gtest_brief=1 prints no "[ RUN ]" lines; the classifier's own markers judge it
    source = tmp_path / "brief.cpp"
    source.write_text("#include <gtest/gtest.h>\nTEST(Eltwise, Add) { EXPECT_EQ(1 + 1, 2); }\nTEST(Eltwise, Mul) { EXPECT_EQ(2 * 2, 4); }\n")
    binary = tmp_path / "brief"
    subprocess.run(["g++", "-std=c++17", str(source), "-o", str(binary), "-lgtest", "-lgtest_main", "-pthread"], check=True, timeout=300)
    passed = subprocess.run([str(binary), "--gtest_brief=1"], capture_output=True, text=True, timeout=60)
    assert passed.returncode == 0 and "[ RUN" not in passed.stdout
    assert classify_log(passed.stdout.splitlines()).outcome is Outcome.PASS
    source.write_text(source.read_text().replace("2 * 2, 4", "2 * 2, 5"))
    subprocess.run(["g++", "-std=c++17", str(source), "-o", str(binary), "-lgtest", "-lgtest_main", "-pthread"], check=True, timeout=300)
    failed = subprocess.run([str(binary), "--gtest_brief=1"], capture_output=True, text=True, timeout=60)
    # 1.12.1's brief printer ends with "[  PASSED  ] 1 test." even here, after the failure's
    # "[  FAILED  ] Eltwise.Mul (0 ms)": the failure line must decide
    assert failed.returncode == 1 and "[  FAILED  ] Eltwise.Mul" in failed.stdout
    assert failed.stdout.rstrip().endswith("[  PASSED  ] 1 test.")
    verdict = classify_log(failed.stdout.splitlines())
    assert verdict.outcome is Outcome.FAIL and "brief.cpp:3: Failure" in verdict.message  # no RUN line: judged as the process's
