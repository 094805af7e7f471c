"""Job specs written for a test: the smallest valid job around the part a test varies."""

from __future__ import annotations

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
