"""One bounded reader and one safe writer for every file the harness reads or writes.

Reading: only a regular file, opened without blocking (a FIFO never hangs the harness), refused
by its size before a byte is read, and never more than the limit read.

Writing (:func:`check_output` first, before anything runs): a regular file or a new one is
replaced atomically; a character device or a FIFO (``/dev/null``, a pipe) is written through,
never replaced; a directory, or any other kind of file, is refused with a clear message.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from harness.core.errors import InputError


def read_bounded(path: str | Path, limit: int, what: str = "file") -> bytes:
    shown = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError.at(shown, 1, 1, f"cannot read {what}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise InputError.at(shown, 1, 1, f"{what} is {kind}: give the path of a regular file")
        if info.st_size > limit:
            raise InputError.at(shown, 1, 1, f"{what} is {info.st_size} bytes; more than {limit} are refused")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:  # it grew while we read it
            raise InputError.at(shown, 1, 1, f"{what} is more than {limit} bytes; refused")
        return b"".join(chunks)
    finally:
        os.close(fd)


class OutputError(Exception):
    """An output path the harness must not or cannot write."""


def check_output(path: str | Path, what: str = "output") -> None:
    """Refuse, before anything runs, an output path that is a directory or an odd file, or
    whose folder is not a folder."""
    path = Path(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        _check_nearest_folder(path.parent, path, what)
        return
    except OSError as exc:
        raise OutputError(f"{what} {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise OutputError(f"{what} {path} is a folder: give a file path")
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISCHR(info.st_mode) or stat.S_ISFIFO(info.st_mode)):
        raise OutputError(f"{what} {path} is neither a regular file, a character device nor a FIFO: refused")


def check_output_dir(path: str | Path, what: str = "output folder") -> None:
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputError(f"{what} {path} is not a folder")
    _check_nearest_folder(path.parent, path, what)


def _check_nearest_folder(start: Path, path: Path, what: str) -> None:
    """The nearest existing one of ``start`` and its parents must be a folder: the rest is made."""
    for ancestor in (start, *start.parents):
        if ancestor.exists():
            if not ancestor.is_dir():
                raise OutputError(f"{what} {path}: {ancestor} is not a folder")
            return


def write_through(path: Path, data: bytes) -> bool:
    """Write ``data`` into a character device or FIFO at ``path``; False if it is not one.
    A FIFO nobody reads is an error, not a hang."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return False
    if not (stat.S_ISCHR(info.st_mode) or stat.S_ISFIFO(info.st_mode)):
        return False
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise OutputError(f"{path} is a FIFO that nobody reads") from None
        raise OutputError(f"{path}: {exc.strerror or exc}") from None
    try:
        os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    return True
