"""Where the run history lives when ``--history`` is not given: one rule for every command."""

from __future__ import annotations

import os
from pathlib import Path

HISTORY_ENV = "TT_HARNESS_HISTORY"


def default_history_url() -> str:
    """``$TT_HARNESS_HISTORY``, else ``history.sqlite`` in the user's data directory
    (``$XDG_DATA_HOME/tt-harness``, by default ``~/.local/share/tt-harness``)."""
    if os.environ.get(HISTORY_ENV):
        return os.environ[HISTORY_ENV]
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return str(Path(data) / "tt-harness" / "history.sqlite")
