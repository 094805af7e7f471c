"""`harness render` and `harness run` as a user runs them, on this machine (which has no card)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import xmlschema
from typer.testing import CliRunner

import harness.cli  # noqa: F401  (registers the commands)
from harness.cli.app import app
from harness.cli.common import INVENTORY_ENV
from tests.paths import JUNIT_XSD

REPO = Path(__file__).resolve().parents[1]


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def test_render_json_gives_each_checks_exact_argv():
    result = run("render", str(REPO / "jobs" / "layernorm-bw.yaml"), "--json")
    assert result.exit_code == 0, result.output
    checks = json.loads(result.stdout)["checks"]
    assert [c["name"] for c in checks] == ["layernorm-bw-bugrepro", "layernorm-bw-nightly", "layernorm-bw-small-shapes"]
    argv = checks[0]["docker_run"]
    assert argv[:3] == ["docker", "run", "--rm"] and argv[-3:] == [
        "build/tt-train/tests/ttml_tests",
        "--gtest_filter=LayerNormBackwardOpTest.BugRepro_*",
        "--gtest_output=xml:/harness/out/gtest.xml",
    ]
    assert checks[0]["docker_build"][:2] == ["docker", "build"]


def test_render_text_is_shell_quoted_and_round_trips():
    result = run("render", str(REPO / "jobs" / "layernorm-bw.yaml"))
    assert result.exit_code == 0
    as_json = json.loads(run("render", str(REPO / "jobs" / "layernorm-bw.yaml"), "--json").stdout)
    runs = [line for line in result.stdout.split("\n# ")[0].splitlines()]
    # The docker run command spans lines (the probe script is one quoted argument).
    text = result.stdout.split("\n# ")[0]
    command = text[text.index("docker run") :].strip()
    assert shlex.split(command) == as_json["checks"][0]["docker_run"]
    assert runs[0] == "# layernorm-bw / layernorm-bw-bugrepro"


def test_run_on_this_machine_is_an_environment_fault_with_reports(tmp_path, monkeypatch):
    monkeypatch.delenv(INVENTORY_ENV, raising=False)
    junit_path = tmp_path / "feed.xml"
    result = run("run", str(REPO / "jobs" / "layernorm-bw.yaml"), "--out", str(tmp_path), "--junit", str(junit_path), "-q")
    assert result.exit_code == 3, result.output
    assert "layernorm-bw: 3 env_fault" in result.stdout
    xmlschema.XMLSchema(str(JUNIT_XSD)).validate(str(junit_path))
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["exit_code"] == 3 and summary["counts"]["env_fault"] == 3
    (host,) = summary["hosts"]
    assert {c["category"] for c in host["cases"]} == {"driver-missing"}


def test_run_with_a_bad_spec_exits_2_and_runs_nothing(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text((REPO / "jobs" / "device-smoke.yaml").read_text().replace("timeout: 2m", "timeout: soon"))
    result = run("run", str(spec), "--out", str(tmp_path / "out"))
    assert result.exit_code == 2
    assert "timeout must be seconds or a duration like 90s, 30m, 2h; got 'soon'" in result.stderr
    assert not (tmp_path / "out").exists()


def test_run_on_an_unknown_host_exits_2(tmp_path):
    result = run("run", str(REPO / "jobs" / "device-smoke.yaml"), "--hosts", "nosuchhost", "--out", str(tmp_path))
    assert result.exit_code == 2 and "no host named 'nosuchhost'" in result.stderr


def test_run_when_no_host_has_the_board(tmp_path):
    inventory = tmp_path / "lab.yaml"
    inventory.write_text("hosts:\n  - {name: ws, transport: local, labels: [n150], boards: [{type: p150, devices: [0]}]}\n")
    result = run("run", str(REPO / "jobs" / "device-smoke.yaml"), "-i", str(inventory), "--out", str(tmp_path / "o"))
    assert result.exit_code == 2 and "has labels ['n150'] and a n150" in result.stderr
