"""The run lock: one ``harness run`` of a job per output folder at a time.

A scheduled nightly that overruns, or a developer starting the suite by hand while the timer
does, must not interleave two runs' reports in one folder. The lock is ``flock`` on
``OUT/.tt-harness-<job>.lock``: the kernel holds it for the process and releases it when the
process ends however it ends, so a killed run (SIGKILL, OOM, a reboot) never leaves a lock
that blocks the next night. The file itself only says who holds it (pid, host, boot, start
time, as JSON) for the message an arriving run prints.

Two ways a lock file can be stale, both reported and taken over, never obeyed:

- the file still names a holder but nobody holds the ``flock``: that run ended without
  releasing (a normal release empties the file), i.e. it was killed;
- the ``flock`` is held but the named holder is dead on this host (its pid is gone, or the pid
  now belongs to another process, told by the process's start time, or the holder ran in an
  earlier boot): a descriptor of the lock lived on in a leftover child. Then the file is
  unlinked and a new one locked; the leftover keeps a lock on an inode nobody looks at.

A holder on another host (an output folder on a shared file system) cannot be checked and is
obeyed. After taking the ``flock`` the lock makes sure the file it locked is still the one at
the path (someone may have unlinked a stale one meanwhile), else it starts over.

Waiting: ``wait`` seconds (0: not at all), polling every half second, then :class:`LockBusy`;
``harness run`` exits :data:`harness.core.outcomes.EXIT_LOCKED` with the holder's details.
"""

from __future__ import annotations

import datetime
import errno
import fcntl
import json
import os
import socket
import stat
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

_MAX_LOCK_FILE = 4096  # a holder's record is ~200 bytes; anything bigger is not ours
_POLL = 0.5


def lock_path(out_dir: Path, job: str) -> Path:
    """The lock of ``job`` in ``out_dir`` (job names are letters, digits, ``. _ -``)."""
    return Path(out_dir) / f".tt-harness-{job}.lock"


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            return handle.read(64).strip()
    except OSError:
        return ""


def _start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (``/proc/PID/stat`` field 22): with
    the pid, it names one process; a reused pid has another start time."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read(4096)
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may contain spaces and ')'.
    try:
        return int(data[data.rindex(b")") + 2:].split()[19])
    except (ValueError, IndexError):
        return None


@dataclass(frozen=True)
class Holder:
    """Who holds (or held) a run lock."""

    pid: int
    host: str
    started: str  # ISO 8601, UTC
    job: str = ""
    boot_id: str = ""
    start_ticks: int | None = None

    @classmethod
    def me(cls, job: str) -> "Holder":
        now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
        return cls(os.getpid(), socket.gethostname(), now.strftime("%Y-%m-%dT%H:%M:%SZ"), job,
                   _boot_id(), _start_ticks(os.getpid()))

    @classmethod
    def parse(cls, data: bytes) -> "Holder | None":
        """The holder a lock file names; None for an empty or foreign file."""
        try:
            raw = json.loads(data.decode("utf-8"))
            ticks = raw.get("start_ticks")
            holder = cls(int(raw["pid"]), str(raw["host"]), str(raw["started"]), str(raw.get("job", "")),
                         str(raw.get("boot_id", "")), int(ticks) if ticks is not None else None)
        except (ValueError, TypeError, KeyError, AttributeError, UnicodeDecodeError):
            return None
        return holder if holder.pid > 0 else None

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}, started {self.started}"

    def dead(self) -> bool:
        """True only when this host can tell the holder is gone; a holder elsewhere is alive."""
        if self.host != socket.gethostname():
            return False
        here = _boot_id()
        if self.boot_id and here and self.boot_id != here:
            return True  # it ran before this machine last booted
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass  # exists, as another user
        ticks = _start_ticks(self.pid)
        return self.start_ticks is not None and ticks is not None and ticks != self.start_ticks


class LockBusy(Exception):
    """Another live run holds the lock."""

    def __init__(self, path: Path, holder: Holder | None, waited: float) -> None:
        self.path, self.holder, self.waited = path, holder, waited
        who = holder.describe() if holder else "a run that has not yet written its details"
        after = f" after waiting {waited:.0f} s" if waited > 0 else ""
        super().__init__(f"another run holds {path} ({who}){after}")


class LockError(Exception):
    """The lock file cannot be used at all (not a regular file, no permission)."""


class RunLock:
    """A held run lock; :meth:`release` (or the ``with`` block's end) lets the next run in."""

    def __init__(self, path: Path, fd: int, holder: Holder, stale: Holder | None) -> None:
        self.path, self._fd, self.holder = path, fd, holder
        self.stale = stale  # the dead run whose lock this one took over, if any

    def release(self) -> None:
        if self._fd < 0:
            return
        fd, self._fd = self._fd, -1
        try:
            os.ftruncate(fd, 0)  # an empty file: released cleanly, nothing stale to report
        except OSError:
            pass
        finally:
            os.close(fd)  # closing drops the flock

    def __enter__(self) -> "RunLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _open(path: Path) -> int:
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LockError(f"run lock {path} is a symbolic link: refused (remove it)") from None
        raise LockError(f"run lock {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise LockError(f"run lock {path} is not a regular file: refused (remove it)")
    return fd


def _read(fd: int) -> Holder | None:
    try:
        return Holder.parse(os.pread(fd, _MAX_LOCK_FILE, 0))
    except OSError:
        return None


def _same_file(fd: int, path: Path) -> bool:
    try:
        here, there = os.fstat(fd), os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def acquire(out_dir: Path, job: str, wait: float = 0.0, on_line: Callable[[str], None] | None = None,
            sleep: Callable[[float], None] = time.sleep) -> RunLock:
    """Take ``job``'s run lock in ``out_dir`` (made if missing), waiting up to ``wait`` seconds
    for a live holder; raise :class:`LockBusy` when it still holds it, :class:`LockError` when
    the lock file cannot be used. ``on_line`` hears about waiting and stale locks."""
    say = on_line or (lambda line: None)
    path = lock_path(out_dir, job)
    try:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LockError(f"output folder {out_dir}: {exc.strerror or exc}") from None
    started = time.monotonic()
    stale: Holder | None = None
    announced = False
    while True:
        fd = _open(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(fd)
            if holder is not None and holder.dead() and _same_file(fd, path):
                say(f"run lock {path}: its holder ({holder.describe()}) is dead but a leftover process "
                    "keeps the lock open; taking it over")
                stale = holder
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
                os.close(fd)
                continue
            os.close(fd)
            waited = time.monotonic() - started
            if waited >= wait:
                raise LockBusy(path, holder, waited) from None
            if not announced:
                who = holder.describe() if holder else "another run"
                say(f"waiting up to {wait:.0f} s for the run lock {path}, held by {who}")
                announced = True
            sleep(min(_POLL, max(wait - waited, 0.0)))
            continue
        except OSError as exc:
            os.close(fd)
            raise LockError(f"run lock {path}: flock failed: {exc.strerror or exc}") from None
        if not _same_file(fd, path):  # a stale file we waited on was unlinked: lock the new one
            os.close(fd)
            continue
        previous = _read(fd)
        if previous is not None:
            # A clean release leaves the file empty: a record left behind is a run that was killed.
            say(f"run lock {path}: stale lock of a run that did not end cleanly ({previous.describe()}); taking it over")
            stale = stale or previous
        me = Holder.me(job)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(asdict(me)) + "\n").encode("utf-8"), 0)
        except OSError as exc:
            os.close(fd)
            raise LockError(f"run lock {path}: cannot write its holder: {exc.strerror or exc}") from None
        return RunLock(path, fd, me, stale)
