"""``harness validate`` and ``harness render``: check specs and show exactly what would run."""

from __future__ import annotations

from pathlib import Path
from typing import List

import typer

from harness.cli.app import app
from harness.cli.common import fail_input, print_json, print_problems
from harness.core.errors import InputError, Problem
from harness.core.inventory import load_inventory
from harness.core.invocation import docker_run_argv, quoted
from harness.core.outcomes import EXIT_OK, EXIT_USAGE
from harness.core.profiles import default_boards, load_profiles
from harness.core.spec import load_job
from harness.core.yamlnodes import load_file
from harness.execution.images import docker_build_argv, image_tag


def _kind_of(path: Path) -> str:
    """Which kind of file this is, from its top-level keys."""
    root = load_file(path)
    keys = set(root.value) if root.is_map else set()
    if "checks" in keys:
        return "job"
    if "hosts" in keys:
        return "inventory"
    if "profiles" in keys:
        return "profiles"
    raise root.fail("not a job spec (no `checks`), an inventory (no `hosts`) or a profile catalog (no `profiles`)")


def _expand(paths: List[Path]) -> list[Path]:
    files = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml"))
        else:
            files.append(path)
    return files


@app.command("validate")
def validate(paths: List[Path] = typer.Argument(..., help="Job specs, inventories, profile catalogs, or folders of them.")) -> None:
    """Validate job specs and inventories; print `path:line:col: message` for each problem."""
    problems: list[Problem] = []
    for path in _expand(paths):
        try:
            kind = _kind_of(path)
            if kind == "job":
                job = load_job(path)
                print_problems(job.warnings)
                typer.echo(f"{path}: ok (job {job.name}, {len(job.checks)} checks, profile {job.profile.name})")
            elif kind == "inventory":
                inventory = load_inventory(path)
                typer.echo(f"{path}: ok (inventory, {len(inventory.hosts)} hosts)")
            else:
                profiles = load_profiles(str(path))
                typer.echo(f"{path}: ok (profiles: {', '.join(profiles)})")
        except InputError as exc:
            problems.extend(exc.problems)
    if problems:
        print_problems(problems)
        raise typer.Exit(EXIT_USAGE)
    raise typer.Exit(EXIT_OK)


@app.command("render")
def render(
    job_path: Path = typer.Argument(..., metavar="JOB", help="A job spec."),
    as_json: bool = typer.Option(False, "--json", help='Print {"checks": [{"name", "docker_build", "docker_run"}]}.'),
) -> None:
    """Print, per check, the exact `docker build` and `docker run` argv, shell-quoted."""
    try:
        job = load_job(job_path)
    except InputError as exc:
        raise fail_input(exc)
    print_problems(job.warnings)
    tag = image_tag(job)
    build = docker_build_argv(job)
    board_devices = _default_devices(job)
    checks = []
    for check in job.checks:
        run = docker_run_argv(
            job, check, tag, run_id="render", attempt=1,
            host_workdir=f"/tmp/harness/render/{check.name}", device_ids=board_devices,
        )
        checks.append({"name": check.name, "docker_build": build, "docker_run": run})
    if as_json:
        print_json({"checks": checks})
        return
    for entry in checks:
        typer.echo(f"# {job.name} / {entry['name']}")
        typer.echo(quoted(entry["docker_build"]))
        typer.echo(quoted(entry["docker_run"]))
        typer.echo("")


def _default_devices(job) -> list[int]:
    """Without an inventory, assume the job's boards are numbered from /dev/tenstorrent/0."""
    if job.device is None:
        return []
    return list(range(default_boards()[job.device.board].mmio_devices * job.device.count))
