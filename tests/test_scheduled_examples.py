"""The scheduled-run examples in configs/examples/: systemd units and CI schedules.

The systemd units are checked by the real `systemd-analyze verify` (offline: PID 1 need not be
systemd); it insists that ExecStart's binary exists, so a drop-in beside a copy of the units
points it at this checkout's `harness`, with the shipped arguments. The CI files are loaded as
YAML and held to what their services need; the `harness run` command line each one runs is
parsed by the real CLI, so an option that does not exist fails here.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
import yaml

import harness.cli  # noqa: F401  (registers the commands)
from harness.cli.app import app
from harness.core.outcomes import EXIT_ENV_FAULT

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "configs" / "examples"
SERVICE = EXAMPLES / "systemd" / "tt-harness-nightly.service"
TIMER = EXAMPLES / "systemd" / "tt-harness-nightly.timer"
GITHUB = EXAMPLES / "ci" / "github-actions-nightly.yml"
GITLAB = EXAMPLES / "ci" / "gitlab-ci-nightly.yml"
HARNESS = Path(sys.executable).parent / "harness"  # this checkout's, installed by scripts/test
CRON = re.compile(r"^(\S+\s+){4}\S+$")


def unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """A unit file's sections and keys (a key may repeat, as ExecStart= can)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def parse_run(argv: list[str]):
    """Parse ``harness run ...`` with the real CLI (typer's click), without running it."""
    assert Path(argv[0]).name == "harness" and argv[1] == "run", argv
    group = typer.main.get_command(app)
    command = group.get_command(group.context_class(group), "run")
    return command.make_context("run", argv[2:])


def analyze(*paths: Path) -> subprocess.CompletedProcess:
    systemd_analyze = shutil.which("systemd-analyze")
    assert systemd_analyze, "systemd-analyze is missing: scripts/test installs Debian's systemd"
    return subprocess.run([systemd_analyze, "verify", *map(str, paths)], capture_output=True, text=True, timeout=60)


def installed_copy(tmp_path: Path) -> tuple[Path, Path]:
    """The units as shipped, plus a drop-in pointing ExecStart at this checkout's harness."""
    service, timer = tmp_path / SERVICE.name, tmp_path / TIMER.name
    shutil.copy(SERVICE, service)
    shutil.copy(TIMER, timer)
    (exec_start,) = unit(SERVICE)["Service"]["ExecStart"]
    argv = shlex.split(exec_start)
    dropin = tmp_path / f"{SERVICE.name}.d"
    dropin.mkdir()
    (dropin / "test.conf").write_text(f"[Service]\nExecStart=\nExecStart={shlex.join([str(HARNESS), *argv[1:]])}\n")
    return service, timer


def test_systemd_units_pass_systemd_analyze_verify(tmp_path):
    assert HARNESS.exists()
    service, timer = installed_copy(tmp_path)
    result = analyze(service, timer)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "", result.stderr  # not even a warning (an unknown key is one)


def test_systemd_analyze_verify_catches_a_broken_unit(tmp_path):
    # The check above can fail: a misspelt key and an unparsable value are warnings on stderr.
    service, timer = installed_copy(tmp_path)
    service.write_text(service.read_text().replace("TimeoutStartSec=", "TimeoutStartSecs="))
    timer.write_text(timer.read_text().replace("Persistent=true", "Persistent=maybe"))
    result = analyze(service, timer)
    assert "Unknown key 'TimeoutStartSecs'" in result.stderr
    assert "Failed to parse boolean value" in result.stderr


def test_the_service_is_a_oneshot_nightly_run_as_a_dedicated_user():
    service = unit(SERVICE)["Service"]
    assert service["Type"] == ["oneshot"] and service["User"] == ["tt-harness"]
    assert service["TimeoutStartSec"] and service.get("PrivateTmp") == ["no"]
    (exec_start,) = service["ExecStart"]
    ctx = parse_run(shlex.split(exec_start))
    assert Path(ctx.params["job_path"]).name == "nightly.yaml"
    assert Path(ctx.params["out"]) == Path("/var/lib/tt-harness/nightly") and int(ctx.params["keep"]) == 30
    assert float(ctx.params["lock_wait"]) == 0
    timer = unit(TIMER)["Timer"]
    assert timer["Persistent"] == ["true"] and timer["RandomizedDelaySec"] and timer["OnCalendar"]
    assert timer["Unit"] == [SERVICE.name]


def test_a_command_line_the_cli_refuses_fails_the_parse():
    with pytest.raises(Exception, match="No such option: --keep-runs"):
        parse_run(["harness", "run", "jobs/nightly.yaml", "--keep-runs", "3"])
    with pytest.raises(Exception, match="greater than or equal to 1|not in the range x>=1"):
        parse_run(["harness", "run", "jobs/nightly.yaml", "--keep", "0"])


def harness_lines(commands: list[str]) -> list[list[str]]:
    runs = [shlex.split(c) for c in commands if ".venv/bin/harness run" in c]
    assert runs, commands
    return runs


def test_github_actions_schedule_runs_the_nightly_and_publishes_its_junit():
    workflow = yaml.safe_load(GITHUB.read_text())
    on = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    (schedule,) = on["schedule"]
    assert CRON.match(schedule["cron"])
    (job,) = workflow["jobs"].values()
    steps = job["steps"]
    (run,) = harness_lines([s["run"] for s in steps if "run" in s])
    ctx = parse_run(run)
    out = str(ctx.params["out"])
    assert str(ctx.params["job_path"]) == "jobs/nightly.yaml" and (REPO / "jobs" / "nightly.yaml").exists()
    uses = {s["uses"].split("@")[0]: s for s in steps if "uses" in s}
    upload = uses["actions/upload-artifact"]
    assert upload["if"] == "always()" and upload["with"]["path"].rstrip("/") == out
    report = uses["mikepenz/action-junit-report"]
    assert report["if"] == "always()" and report["with"]["report_paths"] == f"{out}/junit.xml"
    assert workflow["permissions"]["checks"] == "write"


def test_gitlab_ci_schedule_runs_the_nightly_and_attaches_its_junit():
    config = yaml.safe_load(GITLAB.read_text())
    (job,) = config.values()
    assert any("$CI_PIPELINE_SOURCE == \"schedule\"" in rule["if"] for rule in job["rules"])
    (run,) = harness_lines(job["script"])
    ctx = parse_run(run)
    out = str(ctx.params["out"])
    artifacts = job["artifacts"]
    assert artifacts["when"] == "always" and artifacts["reports"]["junit"] == f"{out}/junit.xml"
    assert f"{out}/" in artifacts["paths"]
    assert job["allow_failure"]["exit_codes"] == [EXIT_ENV_FAULT]  # env faults only: a warning
