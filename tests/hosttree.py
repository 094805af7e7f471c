"""STAND-IN host trees for preflight tests: a fake /sys, /dev and /proc, and a fake tt-smi.

``build_host`` lays a tree out as tt-kmd, the kernel and tt-system-tools lay them out on a real
host (the ROOT argument of the preflight gather); ``beating`` keeps the firmware heartbeat
counters moving; ``fake_tt_smi`` prints a ``snapshot`` (or an error) as the real tt-smi does.
"""

from __future__ import annotations

import os
import stat
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping


def snapshot(*chips: str) -> str:
    """A realistic `tt-smi -s --snapshot_no_tty` stdout (tt-smi 3.x schema, trimmed) for chips
    like "n300 L", preceded by a UMD log line holding braces, as tt-smi's stdout can be."""
    devices = ",\n".join(
        f"""        {{"board_info": {{"bus_id": "{'0000:01:00.0' if chip.endswith('L') else 'N/A'}", "board_type": "{chip}",
                        "board_id": "0100014211703036"}},
         "firmwares": {{"fw_bundle_version": "18.5.0.0", "eth_fw": "6.15.0"}}}}"""
        for chip in chips
    )
    return f"""\
2025-06-02 10:00:00.000 | info     |             UMD | Opening local chip ids/PCIe ids: {{0}}/[0] and remote chip ids {{1}} (cluster.cpp:173)
{{
    "time": "2025-06-02T10:00:01.000000",
    "host_info": {{"OS": "Linux", "Distro": "Ubuntu 22.04.5 LTS", "Kernel": "6.8.0-87-generic", "Driver": "TT-KMD 2.3.0"}},
    "host_sw_vers": {{"tt_smi": "3.0.32", "pyluwen": "0.7.6", "tt_umd": "0.1.0"}},
    "device_info": [
{devices}
    ],
    "processes": []
}}
"""


@dataclass(frozen=True)
class Card:
    """One /dev/tenstorrent/N with its sysfs folder, as tt-kmd shows it."""

    card_type: str = "n150"
    fw_bundle: str = "18.5.0.0"
    heartbeat: str | None = "1000"
    bdf: str = "0000:01:00.0"
    iommu: str | None = None  # iommu_group/type ("DMA-FQ", "identity"); None: no IOMMU group
    pids: tuple[tuple[int, str], ...] = ()  # (pid, comm) of the processes using it
    node: bool = True


def build_host(
    root: Path,
    cards: Mapping[int, Card],
    *,
    kmd: str | None = "2.3.0",
    hugepages: tuple[int, int] | None = (4, 4),
    hugepage_mount: str | None = "rw,relatime,pagesize=1024M",
) -> Path:
    """A STAND-IN host tree at ``root``: what a real host shows under /sys, /dev and /proc."""
    sys_, dev, proc = root / "sys", root / "dev", root / "proc"
    for folder in (sys_, dev, proc):
        folder.mkdir(parents=True, exist_ok=True)
    if kmd is not None:
        write(sys_ / "module/tenstorrent/version", kmd + "\n")
    mounts = [
        "sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0",
        "proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0",
        "hugetlbfs /dev/hugepages hugetlbfs rw,relatime,pagesize=2M 0 0",
    ]
    if hugepage_mount is not None:
        mounts.append(f"hugetlbfs /dev/hugepages-1G hugetlbfs {hugepage_mount} 0 0")
        (dev / "hugepages-1G").mkdir(exist_ok=True)
    write(proc / "mounts", "\n".join(mounts) + "\n")
    if hugepages is not None:
        pages = sys_ / "kernel/mm/hugepages/hugepages-1048576kB"
        write(pages / "nr_hugepages", f"{hugepages[0]}\n")
        write(pages / "free_hugepages", f"{hugepages[1]}\n")
    (proc / "driver/tenstorrent").mkdir(parents=True, exist_ok=True)
    for n, card in cards.items():
        _card(root, n, card)
    return root


def _card(root: Path, n: int, card: Card) -> None:
    sys_ = root / "sys"
    if card.node:
        node = root / "dev/tenstorrent" / str(n)
        node.parent.mkdir(parents=True, exist_ok=True)
        # A character device like the real node (mknod needs root; without it the stand-in is wrong).
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    # The PCI device, its tenstorrent class device, and the links the kernel makes to them.
    pci = sys_ / "devices/pci0000:00" / card.bdf
    folder = pci / "tenstorrent" / f"tenstorrent!{n}"
    write(folder / "tt_card_type", card.card_type + "\n")
    write(folder / "tt_fw_bundle_ver", card.fw_bundle + "\n")
    if card.heartbeat is not None:
        write(folder / "tt_heartbeat", card.heartbeat + "\n")
    (folder / "device").symlink_to(f"../../../{card.bdf}")
    link(sys_ / "class/tenstorrent" / f"tenstorrent!{n}", f"../../devices/pci0000:00/{card.bdf}/tenstorrent/tenstorrent!{n}")
    link(sys_ / "bus/pci/devices" / card.bdf, f"../../../devices/pci0000:00/{card.bdf}")
    if card.iommu is not None:
        group = sys_ / "kernel/iommu_groups" / str(n + 7)
        write(group / "type", card.iommu + "\n")
        (pci / "iommu_group").symlink_to(f"../../../kernel/iommu_groups/{n + 7}")
    write(root / "proc/driver/tenstorrent" / str(n) / "pids", "".join(f"{pid}\n" for pid, _ in card.pids))
    for pid, comm in card.pids:
        write(root / "proc" / str(pid) / "comm", comm + "\n")


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def link(path: Path, target: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)


def heartbeat_path(root: Path, n: int) -> Path:
    return root / "sys/class/tenstorrent" / f"tenstorrent!{n}" / "tt_heartbeat"


@contextmanager
def beating(*paths: Path) -> Iterator[None]:
    """Firmware that is alive: each heartbeat counter goes up every few milliseconds."""
    stop = threading.Event()

    def run() -> None:
        count = 1000
        while not stop.is_set():
            count += 1
            for path in paths:
                tmp = path.with_name(".tt_heartbeat.tmp")
                tmp.write_text(f"{count}\n")
                os.replace(tmp, path)  # whole values only: the gather never reads half a write
            stop.wait(0.01)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def fake_tt_smi(folder: Path, stdout: str, status: int = 0) -> str:
    """A stand-in tt-smi printing ``stdout`` (as the real one prints snapshots and errors)."""
    (folder / "snapshot.txt").write_text(stdout)
    script = folder / "tt-smi"
    script.write_text(f"#!/bin/sh\ncat '{folder / 'snapshot.txt'}'\nexit {status}\n")
    script.chmod(0o755)
    return str(script)
