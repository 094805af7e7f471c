"""Inventories: hosts, boards and how to reach them; mistakes located in the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.errors import InputError
from harness.core.inventory import load_inventory

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "configs" / "examples" / "lab.yaml"


def test_example_inventory_loads():
    inventory = load_inventory(EXAMPLE)
    assert [h.name for h in inventory.hosts] == ["bastion", "wh-n150-01", "wh-t3k-01", "workstation"]
    t3k = inventory.host("wh-t3k-01")
    assert t3k.device_ids == (0, 1, 2, 3) and t3k.jump == "bastion" and t3k.host_key_policy == "strict"
    assert inventory.host("wh-n150-01").registry.password == "${TT_LAB_REGISTRY_PASSWORD}"
    assert [h.name for h in inventory.select(labels=("nightly",))] == ["wh-n150-01", "wh-t3k-01"]
    assert [h.name for h in inventory.select(labels=("n150",), names=("workstation",))] == ["workstation"]


def _broken(tmp_path: Path, old: str, new: str) -> tuple[Path, list[str]]:
    text = EXAMPLE.read_text()
    assert old in text
    path = tmp_path / "lab.yaml"
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(InputError) as info:
        load_inventory(path)
    return path, [str(p) for p in info.value.problems]


def _line(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def test_board_device_count_must_match_the_board(tmp_path):
    path, problems = _broken(tmp_path, "devices: [0, 1, 2, 3]", "devices: [0, 1]")
    assert problems == [f"{path}:{_line(path, 'devices: [0, 1]}')}:32: a t3000 shows 4 /dev/tenstorrent node(s) to the host; 2 device id(s) given"]


def test_unknown_jump_host(tmp_path):
    path, problems = _broken(tmp_path, "jump: bastion", "jump: bastoin")
    assert problems == [f"{path}:{_line(path, 'jump: bastoin')}:11: jump host 'bastoin' is not in this inventory (did you mean 'bastion'?)"]


def test_registry_password_must_be_a_reference(tmp_path):
    path, problems = _broken(tmp_path, "${TT_LAB_REGISTRY_PASSWORD}", "hunter2")
    assert len(problems) == 1 and problems[0].startswith(f"{path}:{_line(path, 'hunter2')}:17: registry password is a secret")
    assert "hunter2" not in problems[0]


def test_local_host_rejects_ssh_settings(tmp_path):
    path, problems = _broken(tmp_path, "    transport: local", "    transport: local\n    address: 127.0.0.1")
    assert len(problems) == 1 and "uses the local transport" in problems[0]


def test_duplicate_host_names(tmp_path):
    path, problems = _broken(tmp_path, "- name: wh-t3k-01", "- name: wh-n150-01")
    assert problems == [f"{path}:{_line(path, 'address: 10.20.0.21') - 1}:5: duplicate host name 'wh-n150-01' (first at line {_line(path, 'name: wh-n150-01')})"]
