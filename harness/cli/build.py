"""``harness build``: build (or reuse) a job's image, or show what would be built."""

from __future__ import annotations

from pathlib import Path

import typer

from harness.cli.app import app
from harness.cli.common import fail_input, print_json, print_problems
from harness.core.errors import InputError
from harness.core.outcomes import EXIT_ENV_FAULT, EXIT_FAILURE
from harness.core.spec import load_job


@app.command("build")
def build(
    job_path: Path = typer.Argument(..., metavar="JOB", help="A job spec."),
    as_json: bool = typer.Option(False, "--json", help='Print {"job", "tag", "image_id", "digest", "built"}.'),
    render_only: bool = typer.Option(
        False, "--render-only", "--dockerfile", help="Print the Dockerfile and docker build command; Docker is not needed."
    ),
) -> None:
    """Build the job's image, or reuse it when its content-hash tag exists; build output goes to stderr.

    Exit 0 built or reused, 1 a Dockerfile step failed, 2 bad spec, 3 Docker unreachable or
    another environment fault.
    """
    from harness.execution.images import ImageError, describe_build, ensure_image, render  # Docker: only here

    try:
        job = load_job(job_path)
    except InputError as exc:
        raise fail_input(exc)
    print_problems(job.warnings)
    try:
        if render_only:
            typer.echo(describe_build(render(job)), nl=False)
            return
        built = ensure_image(job, on_progress=lambda line: typer.echo(line, err=True))
    except ImageError as exc:
        typer.echo(f"harness build: {exc}", err=True)
        if not exc.step_failed:
            typer.echo(f"environment fault: {exc.category}", err=True)
        raise typer.Exit(EXIT_FAILURE if exc.step_failed else EXIT_ENV_FAULT)
    if as_json:
        print_json(
            {"job": job.name, "tag": built.tag, "image_id": built.image_id, "digest": built.digest, "built": built.built}
        )
    else:
        typer.echo(f"{built.tag} {built.digest} ({'built' if built.built else 'reused'})")
