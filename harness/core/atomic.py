"""Atomic file writes: a reader sees the old file or the new one, never half of one.

Only a regular file (or a new one) is replaced; a character device or FIFO is written through
and never replaced, anything else is refused (:mod:`harness.core.files`)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from harness.core.files import check_output, write_through


def write_bytes(path: str | Path, data: bytes) -> None:
    path = Path(path)
    if write_through(path, data):
        return
    check_output(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_text(path: str | Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))
