"""``harness validate`` and ``harness render``: check specs and show exactly what would run."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, List, Mapping

import typer

from harness.cli.app import app
from harness.cli.common import fail_input, print_json, print_problems, usage_error
from harness.core.errors import InputError, Problem
from harness.core.outcomes import EXIT_OK, EXIT_USAGE
from harness.core.profiles import default_boards, load_boards, load_profiles
from harness.core.spec import load_job
from harness.core.yamlnodes import load_file

# Each kind's loader is imported when a file of that kind comes up: `harness validate job.yaml`
# from a hook should not pay for the inventory, preflight, signature and lab-fault modules.


def _job(path: Path) -> str:
    job = load_job(path)
    print_problems(job.warnings)
    return f"job {job.name}, {len(job.checks)} checks, profile {job.profile.name}"


def _inventory(path: Path) -> str:
    from harness.core.inventory import load_inventory
    from harness.execution.connect import Connections  # SSH: only for an inventory

    inventory = load_inventory(path)
    Connections(inventory).check(inventory.hosts)  # a jump-host loop is a problem of the file
    return f"inventory, {len(inventory.hosts)} hosts"


def _thresholds(path: Path) -> str:
    from harness.core.hostfacts import load_preflight_config

    load_preflight_config(str(path), default_boards())
    return "preflight thresholds"


def _named(what: str, load: Callable[[str], Mapping]) -> Callable[[Path], str]:
    return lambda path: f"{what}: {', '.join(load(str(path)))}"


def _signatures(path: Path) -> str:
    from harness.core.signatures import load_catalog

    return f"signatures: {len(load_catalog(path).signatures)} entries"


def _summaries(path: Path) -> str:
    from harness.core.summaries import load_summaries

    return f"summaries: {len(load_summaries(path))} entries"


def _faults(path: str) -> Mapping:
    from harness.lab.faults import load_faults

    return load_faults(path)


# What each kind of file is known by (a top-level key), and how it is checked.
KINDS: tuple[tuple[str, str, Callable[[Path], str]], ...] = (
    ("checks", "a job spec", _job),
    ("hosts", "an inventory", _inventory),
    ("profiles", "a profile catalog", _named("profiles", load_profiles)),
    ("boards", "a board catalog", _named("boards", load_boards)),
    ("signatures", "a signature catalog", _signatures),
    ("summaries", "a summary catalog", _summaries),
    ("faults", "a lab fault catalog", _named("lab faults", _faults)),
    ("kmd_minimum", "preflight thresholds", _thresholds),
)


def _check(path: Path) -> str:
    root = load_file(path)
    keys = set(root.value) if root.is_map else set()
    for key, _, check in KINDS:
        if key in keys:
            return check(path)
    known = "; ".join(f"{what} (`{key}`)" for key, what, _ in KINDS)
    raise root.fail(f"not a file harness knows: it has none of the top-level keys of {known}")


def _expand(paths: List[Path]) -> list[Path]:
    files = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
        else:
            files.append(path)
    return files


@app.command("validate")
def validate(paths: List[Path] = typer.Argument(..., help="Job specs, inventories, catalogs, or folders of them.")) -> None:
    """Validate job specs, inventories and every catalog harness ships; print `path:line:col:
    message` for each problem. Exit 0 all valid, 2 problems (or nothing to check)."""
    problems: list[Problem] = []
    files = _expand(paths)
    if not files:
        raise usage_error(f"nothing to check: no .yaml or .yml file in {', '.join(map(str, paths))}")
    for path in files:
        try:
            typer.echo(f"{path}: ok ({_check(path)})")
        except InputError as exc:
            problems.extend(exc.problems)
        except ValueError as exc:  # a jump-host loop
            problems.append(Problem(str(path), 1, 1, str(exc)))
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
    from harness.core.invocation import docker_run_argv, quoted
    from harness.execution.images import ImageError, docker_build_argv, image_tag  # Docker: only here

    try:
        job = load_job(job_path)
    except InputError as exc:
        raise fail_input(exc)
    print_problems(job.warnings)
    try:
        tag = image_tag(job)
        build = docker_build_argv(job)
    except ImageError as exc:
        raise usage_error(f"{job_path}: {exc.message}")
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
