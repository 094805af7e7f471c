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
        # mkstemp makes the file 0600; the new file gets the mode the old one had, or the one a
        # plain open() would give (reports are meant to be read by others)
        os.fchmod(fd, _mode_for(path))
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


def _mode_for(path: Path) -> int:
    try:
        return os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        return 0o666 & ~_umask()


def _umask() -> int:
    """The process's umask, read without changing it where Linux tells (/proc, since 4.7)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # elsewhere: set and restore (briefly process-wide)
    os.umask(mask)
    return mask
