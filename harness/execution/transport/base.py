"""What every transport shares: the result type, the errors, argv quoting and output handling.

A transport runs one command given as an argv list (never a shell string) on one host, streams
its output line by line while it runs, kills it (and its process group) on timeout, and moves
files to and from the host with size limits. ``LocalTransport`` does it on this machine,
``SshTransport`` on a lab host.
"""

from __future__ import annotations

import abc
import collections
import contextlib
import os
import shlex
import stat
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO, Callable, Iterable, Iterator, Sequence, Union

from harness.core.outcomes import EnvCategory, Verdict

LineCallback = Callable[[str], None]
# What can feed a command's stdin: all of it at once, a binary file/pipe, or chunks.
ByteSource = Union[bytes, BinaryIO, Iterable[bytes]]

CHUNK = 256 * 1024
# A "line" longer than this is handed on in pieces, so output without newlines (a binary dump,
# a progress bar) cannot grow one line without bound.
MAX_LINE = 1024 * 1024
DEFAULT_KILL_GRACE = 5.0
DEFAULT_TAIL_LINES = 50


class TransportError(Exception):
    """The host could not be reached or the connection broke: an environment fault.

    ``category`` says which kind (``ssh`` or ``network``); the message says what to do.
    """

    def __init__(self, category: EnvCategory, message: str):
        super().__init__(message)
        self.category = category
        self.message = message

    def verdict(self) -> Verdict:
        return Verdict.env_fault(self.category, self.message)


class ArtifactError(Exception):
    """A file could not be transferred: missing, not a regular file, over its size limit,
    or its destination is not writable.

    Not an environment fault: the runner reports it as a ``HarnessErrorKind.ARTIFACT`` error.
    """


@dataclass(frozen=True)
class CommandResult:
    """How one command ended.

    ``exit_status`` is ``None`` when the command ended without one: killed by a signal
    (including by our timeout). The tails hold the last lines of output for messages and
    evidence; the full output went to the callbacks, log files or sink.
    """

    argv: tuple[str, ...]
    exit_status: int | None
    stdout_tail: str
    stderr_tail: str
    timed_out: bool
    duration: float

    @property
    def ok(self) -> bool:
        return self.exit_status == 0 and not self.timed_out


def remote_command_line(argv: Sequence[str]) -> str:
    """The one way an argv becomes a command line for a remote POSIX shell.

    Every element is quoted, so nothing in it (``$(...)``, backticks, ``;``, globs, newlines)
    is interpreted by the shell: the remote program receives exactly these strings.
    """
    return shlex.join(check_argv(argv))


def check_argv(argv: Sequence[str]) -> tuple[str, ...]:
    if isinstance(argv, (str, bytes)):
        raise TypeError("a command is an argv list, not a string: split it into arguments")
    argv = tuple(argv)
    if not argv:
        raise ValueError("empty command")
    for arg in argv:
        if not isinstance(arg, str):
            raise TypeError(f"command arguments must be strings, got {type(arg).__name__}: {arg!r}")
        if "\0" in arg:
            # exec() cannot pass a NUL inside an argument; a shell would silently truncate it.
            raise ValueError(f"command argument contains a NUL byte: {arg!r}")
    return argv


def describe_argv(argv: Sequence[str], limit: int = 200) -> str:
    """A command for error messages: quoted like a shell would need it, cut to ``limit``."""
    text = shlex.join(argv)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def iter_chunks(source: ByteSource) -> Iterator[bytes]:
    if isinstance(source, (bytes, bytearray, memoryview)):
        view = memoryview(source)
        for start in range(0, len(view), CHUNK):
            yield bytes(view[start : start + CHUNK])
        return
    read = getattr(source, "read", None)
    if read is not None:
        while chunk := read(CHUNK):
            yield chunk
        return
    for chunk in source:
        if chunk:
            yield chunk


class LineStream:
    """Splits a byte stream into lines for a callback and a log file, keeping the last few.

    Lines are decoded as UTF-8 (undecodable bytes replaced) and given without the newline;
    the log file gets the bytes unchanged.
    """

    def __init__(self, callback: LineCallback | None, log: IO[bytes] | None, tail_lines: int):
        self._callback = callback
        self._log = log
        self._tail: collections.deque[str] = collections.deque(maxlen=tail_lines)
        self._partial = bytearray()

    def feed(self, data: bytes) -> None:
        if self._log is not None:
            self._log.write(data)
        self._partial += data
        start = 0
        while (end := self._partial.find(b"\n", start)) != -1:
            self._emit(self._partial[start:end])
            start = end + 1
        del self._partial[:start]
        while len(self._partial) > MAX_LINE:
            self._emit(self._partial[:MAX_LINE])
            del self._partial[:MAX_LINE]

    def finish(self) -> None:
        if self._partial:
            self._emit(self._partial)
            self._partial.clear()
        if self._log is not None:
            self._log.flush()

    @property
    def tail(self) -> str:
        return "\n".join(self._tail)

    def _emit(self, raw: bytes | bytearray) -> None:
        line = bytes(raw).decode("utf-8", errors="replace")
        if line.endswith("\r"):
            line = line[:-1]
        self._tail.append(line)
        if self._callback is not None:
            self._callback(line)


class RawSink:
    """Hands stdout bytes unchanged to a local sink (e.g. ``docker load``'s stdin)."""

    def __init__(self, sink: IO[bytes]):
        self._sink = sink

    def feed(self, data: bytes) -> None:
        self._sink.write(data)

    def finish(self) -> None:
        self._sink.flush()

    @property
    def tail(self) -> str:
        return ""


OutputHandler = Union[LineStream, RawSink]


def copy_limited(source: IO[bytes], dest: IO[bytes], max_bytes: int | None, what: str) -> int:
    """Copy all of ``source`` to ``dest``; refuse once more than ``max_bytes`` were read.

    The limit is enforced on the bytes actually read, not only on a size checked beforehand:
    the file may still be growing.
    """
    total = 0
    while True:
        want = CHUNK if max_bytes is None else min(CHUNK, max_bytes + 1 - total)
        chunk = source.read(want)
        if not chunk:
            return total
        total += len(chunk)
        if max_bytes is not None and total > max_bytes:
            raise ArtifactError(f"{what} grew past the limit of {max_bytes} bytes while being copied")
        dest.write(chunk)


def receive_atomically(
    source: IO[bytes], dest: Path, max_bytes: int | None, what: str, mode: int | None = None
) -> int:
    """Copy ``source`` to the local ``dest`` through a temp file: complete copy or untouched.

    ``mode`` sets the permission bits (default: mkstemp's 0600).
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            total = copy_limited(source, out, max_bytes, what)
            out.flush()
            os.fsync(out.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, dest)
        return total
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def open_regular_file(path: str | os.PathLike, what: str) -> IO[bytes]:
    """Open a local file for reading, refusing anything but a regular file."""
    try:
        # O_NONBLOCK: opening a FIFO must not hang; it is refused below as not a regular file.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ArtifactError(f"{what} does not exist") from None
    except OSError as exc:
        raise ArtifactError(f"cannot read {what}: {exc.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ArtifactError(f"{what} is not a regular file")
    return os.fdopen(fd, "rb")


def check_size(size: int, max_bytes: int | None, what: str) -> None:
    if max_bytes is not None and size > max_bytes:
        raise ArtifactError(f"{what} is {size} bytes, over the limit of {max_bytes} bytes; refusing to copy it")


class Lifeline:
    """A command's stdin that stays open, sending nothing, until it is cut.

    The host reads it as "the harness still wants this": it closes when :meth:`cut` is called
    (a cancelled check), when the command ends (the transports cut it then), or when the harness
    is gone (killed, or its connection lost), and a command on the host can act on that EOF.
    """

    def __init__(self) -> None:
        self._cut = threading.Event()

    def __iter__(self) -> Iterator[bytes]:
        self._cut.wait()
        return iter(())

    def cut(self) -> None:
        self._cut.set()

    @property
    def is_cut(self) -> bool:
        return self._cut.is_set()


class Transport(abc.ABC):
    """Runs commands on one host and moves files to and from it.

    ``run`` returns when the command has ended; output is streamed while it runs:

    - ``on_stdout``/``on_stderr`` get each line (without newline), in the calling thread;
    - ``stdout_log``/``stderr_log`` get the raw bytes (appended);
    - ``stdout_sink`` gets stdout's raw bytes instead of lines (for ``docker save``);
    - ``stdin`` is streamed into the command's stdin, then closed (no stdin: empty).

    On ``timeout`` the command's process group gets SIGTERM, then SIGKILL after
    ``kill_grace`` seconds; the result has ``timed_out`` set. A timeout is a result, not an
    exception: only a broken connection raises :class:`TransportError`.
    """

    name: str

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        on_stdout: LineCallback | None = None,
        on_stderr: LineCallback | None = None,
        stdout_log: str | os.PathLike | None = None,
        stderr_log: str | os.PathLike | None = None,
        stdin: ByteSource | None = None,
        stdout_sink: IO[bytes] | None = None,
        kill_grace: float = DEFAULT_KILL_GRACE,
        tail_lines: int = DEFAULT_TAIL_LINES,
    ) -> CommandResult:
        argv = check_argv(argv)
        if stdout_sink is not None and (on_stdout is not None or stdout_log is not None):
            raise ValueError("stdout goes either to a raw sink or to lines/log, not both")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        with contextlib.ExitStack() as stack:

            def open_log(path: str | os.PathLike | None) -> IO[bytes] | None:
                if path is None:
                    return None
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                return stack.enter_context(open(path, "ab"))

            out: OutputHandler = (
                RawSink(stdout_sink)
                if stdout_sink is not None
                else LineStream(on_stdout, open_log(stdout_log), tail_lines)
            )
            err = LineStream(on_stderr, open_log(stderr_log), tail_lines)
            started = time.monotonic()
            exit_status, timed_out = self._execute(argv, timeout, out, err, stdin, kill_grace)
            out.finish()
            err.finish()
            return CommandResult(
                argv=argv,
                exit_status=exit_status,
                stdout_tail=out.tail,
                stderr_tail=err.tail,
                timed_out=timed_out,
                duration=time.monotonic() - started,
            )

    @abc.abstractmethod
    def _execute(
        self,
        argv: tuple[str, ...],
        timeout: float | None,
        out: OutputHandler,
        err: LineStream,
        stdin: ByteSource | None,
        kill_grace: float,
    ) -> tuple[int | None, bool]:
        """Run ``argv`` feeding ``out``/``err``; return (exit status or None, timed out)."""

    @abc.abstractmethod
    def get(self, remote: str, local: str | os.PathLike, max_bytes: int) -> int:
        """Copy the host's file ``remote`` to ``local`` (atomically); return its size.

        Raises :class:`ArtifactError` if it is missing, not a regular file or over ``max_bytes``.
        """

    @abc.abstractmethod
    def put(self, local: str | os.PathLike, remote: str, max_bytes: int | None = None) -> int:
        """Copy ``local`` to the host's ``remote`` (atomically, keeping permission bits)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connection; safe to call more than once."""

    def __enter__(self) -> "Transport":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
