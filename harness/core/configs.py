"""Where the catalogs in ``configs/`` live.

The catalogs are data at the repository root (configs/); ``TT_HARNESS_CONFIGS`` points
elsewhere, e.g. to a lab's own copy of the signature catalog.
"""

from __future__ import annotations

import os
from pathlib import Path

_REPO_CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def config_dir() -> Path:
    return Path(os.environ.get("TT_HARNESS_CONFIGS", _REPO_CONFIGS))


def config_path(name: str) -> Path:
    return config_dir() / name
