"""`harness hosts check` as a user runs it: table, JSON lines, exit codes 0/3/2."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

import harness.cli  # noqa: F401  (registers the commands)
from harness.cli.app import app
from harness.cli.hosts import INVENTORY_ENV
from tests.hosttree import Card, build_host, fake_tt_smi, snapshot
from tests.sshd import SshServer


def run(*args: str):
    return CliRunner().invoke(app, ["hosts", "check", *args])


def inventory(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


LOCAL_N150 = """\
hosts:
  - name: wh-01
    transport: local
    boards:
      - {type: n150, devices: [0]}
"""


@pytest.fixture
def n150(tmp_path) -> tuple[Path, str]:
    """A stand-in n150 host tree (no heartbeat attribute, so no wait) and a tt-smi for it."""
    tree = build_host(tmp_path / "host", {0: Card(heartbeat=None)})
    return tree, fake_tt_smi(tmp_path, snapshot("n150 L"))


def test_healthy_host_table_exit_0(tmp_path, n150):
    tree, tt_smi = n150
    inv = inventory(tmp_path / "lab.yaml", LOCAL_N150)
    result = run("--inventory", str(inv), "--root", str(tree), "--tt-smi", tt_smi)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["HOST", "CHECK", "STATUS", "REASON"]
    rows = lines[1:11]
    assert [row.split()[1] for row in rows] == [
        "kmd", "device-nodes", "card-type", "firmware", "heartbeat", "device-busy", "hugepages", "tt-smi", "docker", "disk",
    ]
    # Aligned: every status and every reason starts in the same column as its heading.
    status_col, reason_col = lines[0].index("STATUS"), lines[0].index("REASON")
    assert {row[status_col:].split()[0] for row in rows} <= {"ok", "skip"}
    assert all(row[reason_col - 2 : reason_col] == "  " and row[reason_col] != " " for row in rows)
    assert "wh-01  kmd" in result.stdout and "tt-kmd 2.3.0" in result.stdout
    assert lines[-1] == "wh-01: ok"


def test_json_lines_one_per_host(tmp_path, n150):
    tree, tt_smi = n150
    inv = inventory(tmp_path / "lab.yaml", LOCAL_N150 + "  - name: builder\n    transport: local\n")
    result = run("-i", str(inv), "--root", str(tree), "--tt-smi", tt_smi, "--json")
    assert result.exit_code == 0, result.output
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(o["host"], o["ok"]) for o in objects] == [("wh-01", True), ("builder", True)]
    assert set(objects[0]) == {"host", "ok", "checks"}
    first = objects[0]["checks"][0]
    assert first == {"name": "kmd", "status": "ok", "reason": "tt-kmd 2.3.0", "category": None}
    assert {c["status"] for c in objects[1]["checks"][:8]} == {"skip"}  # no boards: only docker and disk


def test_fault_exit_3_names_the_category(tmp_path, n150):
    tree, tt_smi = n150
    inv = inventory(tmp_path / "lab.yaml", LOCAL_N150.replace("type: n150", "type: n300"))
    result = run("-i", str(inv), "--root", str(tree), "--tt-smi", tt_smi)
    assert result.exit_code == 3, result.output
    assert "[device-missing] device 0: the card is a n150, the inventory declares a n300" in result.stdout
    assert result.stdout.splitlines()[-1] == "wh-01: FAULT (device-missing)"
    json_result = run("-i", str(inv), "--root", str(tree), "--tt-smi", tt_smi, "--json")
    assert json_result.exit_code == 3
    card = next(c for c in json.loads(json_result.stdout)["checks"] if c["name"] == "card-type")
    assert (card["status"], card["category"]) == ("fault", "device-missing")


@pytest.mark.docker
def test_this_machine_without_a_card(tmp_path):
    inv = inventory(tmp_path / "lab.yaml", LOCAL_N150)
    result = run("-i", str(inv), "--tt-smi", "tt-smi-not-installed-here")
    assert result.exit_code == 3
    assert "[driver-missing] no Tenstorrent driver loaded" in result.stdout
    assert "wh-01: FAULT (driver-missing, device-missing, hugepages)" in result.stdout


def test_unreachable_host_is_a_fault_row_and_the_others_are_still_checked(tmp_path, n150):
    tree, tt_smi = n150
    with socket.socket() as sock:  # a port nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    inv = inventory(
        tmp_path / "lab.yaml",
        LOCAL_N150 + f"  - name: gone\n    address: 127.0.0.1\n    port: {port}\n    known_hosts: {tmp_path}/known_hosts\n",
    )
    result = run("-i", str(inv), "--root", str(tree), "--tt-smi", tt_smi)
    assert result.exit_code == 3, result.output
    row = next(line for line in result.stdout.splitlines() if line.startswith("gone "))
    assert row.split()[1:4] == ["connect", "fault", "[ssh]"]
    assert "connection refused" in row
    assert result.stdout.splitlines()[-2:] == ["wh-01: ok", "gone: FAULT (ssh)"]
    assert "Traceback" not in result.output


@pytest.mark.ssh
def test_ssh_host_checked_over_loopback_sshd(tmp_path, n150, sshd: SshServer):
    tree, tt_smi = n150
    inv = inventory(
        tmp_path / "lab.yaml",
        f"""\
hosts:
  - name: wh-ssh
    address: 127.0.0.1
    port: {sshd.port}
    identity_file: {sshd.client_key}
    known_hosts: {sshd.known_hosts}
    boards:
      - {{type: n150, devices: [0]}}
""",
    )
    result = run("-i", str(inv), "--root", str(tree), "--tt-smi", tt_smi, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["host"] == "wh-ssh" and report["ok"] is True
    assert next(c for c in report["checks"] if c["name"] == "card-type")["reason"] == "device 0: n150"


def test_hosts_option_selects_and_rejects_unknown_names(tmp_path, n150):
    tree, tt_smi = n150
    inv = inventory(tmp_path / "lab.yaml", LOCAL_N150 + "  - name: builder\n    transport: local\n  - name: other\n    transport: local\n")
    result = run("-i", str(inv), "--root", str(tree), "--tt-smi", tt_smi, "--json", "--hosts", "builder,other")
    assert [json.loads(line)["host"] for line in result.stdout.splitlines()] == ["builder", "other"]
    result = run("-i", str(inv), "--hosts", "wh-1")
    assert result.exit_code == 2
    assert f"unknown host 'wh-1' in --hosts (did you mean 'wh-01'?); {inv} has: wh-01, builder, other" in result.stderr


def test_inventory_from_the_environment(tmp_path, n150, monkeypatch):
    tree, tt_smi = n150
    monkeypatch.setenv(INVENTORY_ENV, str(inventory(tmp_path / "lab.yaml", LOCAL_N150)))
    result = run("--root", str(tree), "--tt-smi", tt_smi)
    assert result.exit_code == 0, result.output


def test_no_inventory_checks_this_machine(monkeypatch):
    # Without --inventory or $TT_HARNESS_INVENTORY, configs/local.yaml: this machine, which has
    # no Tenstorrent card or driver, so preflight must say so.
    monkeypatch.delenv(INVENTORY_ENV, raising=False)
    result = run("--json")
    assert result.exit_code == 3
    (row,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert row["host"] == "localhost" and row["ok"] is False
    kmd = next(c for c in row["checks"] if c["name"] == "kmd")
    assert kmd["status"] == "fault" and kmd["category"] == "driver-missing"


def test_bad_inventory_exit_2_with_location(tmp_path):
    inv = inventory(tmp_path / "lab.yaml", LOCAL_N150.replace("type: n150", "type: n15"))
    result = run("-i", str(inv))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"{inv}:5:16: unknown board type 'n15' (did you mean 'n150'?")
    assert "Traceback" not in result.output


def test_relative_root_exit_2(tmp_path):
    result = run("-i", str(inventory(tmp_path / "lab.yaml", LOCAL_N150)), "--root", "host")
    assert result.exit_code == 2 and "--root must be an absolute path" in result.stderr


def test_jump_loop_exit_2(tmp_path):
    inv = inventory(
        tmp_path / "lab.yaml",
        "hosts:\n"
        "  - {name: a, address: 127.0.0.1, jump: b}\n"
        "  - {name: b, address: 127.0.0.2, jump: a}\n",
    )
    result = run("-i", str(inv))
    assert result.exit_code == 2
    assert result.stderr.strip() == f"{inv}: jump hosts form a loop: a -> b -> a"
