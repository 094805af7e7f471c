"""Job specs written for a test: the smallest valid job around the part a test varies."""

from __future__ import annotations

import textwrap
from pathlib import Path


def write_job(directory: Path, image: str, name: str = "img-test") -> Path:
    """A minimal job spec whose `image:` mapping is ``image`` (YAML flow text)."""
    path = directory / f"{name}.yaml"
    path.write_text(
        f"name: {name}\n"
        f"image: {image}\n"
        "device: {arch: wormhole_b0, board: n150}\n"
        "checks:\n"
        "  - {name: smoke, kind: command, command: ['true']}\n"
    )
    return path


def write_lab_job(folder: Path, checks: str, *, name: str, fanout: str = "all", smoke: str | None = None) -> Path:
    """A job on the simulated lab's tt-metal image (its STAND-IN binaries, built from the
    repository's ``harness/lab/standin``), written to ``folder/<name>.yaml``; ``checks`` is the
    YAML list of its checks, at any indentation."""
    from tests.paths import REPO

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: {name}
        image:
          project: tt-metal-sim
          base: tt-harness/debian:bookworm
          path: {REPO / "harness" / "lab" / "standin"}
        device: {{arch: wormhole_b0, board: n150}}
        hosts: {{labels: [sim], fanout: {fanout}}}
        """) + (f"smoke: {smoke}\n" if smoke else "") + "checks:\n" + textwrap.indent(textwrap.dedent(checks), "  "))
    return path
