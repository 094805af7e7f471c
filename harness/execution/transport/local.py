"""The transport for a workstation that holds the card itself: subprocess, no shell."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import IO

from harness.execution.transport.base import (
    Lifeline,
    CHUNK,
    ArtifactError,
    ByteSource,
    LineStream,
    OutputHandler,
    Transport,
    check_size,
    open_regular_file,
    iter_chunks,
    receive_atomically,
)


class LocalTransport(Transport):
    """Runs commands on this machine, each in its own session so a timeout kills its children."""

    def __init__(self, name: str = "localhost"):
        self.name = name

    def _execute(
        self,
        argv: tuple[str, ...],
        timeout: float | None,
        out: OutputHandler,
        err: LineStream,
        stdin: ByteSource | None,
        kill_grace: float,
    ) -> tuple[int | None, bool]:
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own process group: killpg reaches its children
            )
        except FileNotFoundError:
            # The same status and message a shell gives, so local and SSH runs read alike.
            err.feed(f"{argv[0]}: command not found\n".encode())
            return 127, False
        except PermissionError:
            err.feed(f"{argv[0]}: permission denied\n".encode())
            return 126, False

        feeder = _StdinFeeder(proc.stdin, stdin) if stdin is not None else None
        finished = False
        try:
            timed_out = _pump(proc, out, err, timeout, kill_grace)
            finished = True
        finally:
            if not finished:
                # A callback raised or we were interrupted: leave no process behind.
                _killpg(proc, signal.SIGKILL)
            for pipe in (proc.stdout, proc.stderr):
                pipe.close()
            proc.wait()
            if isinstance(stdin, Lifeline):
                stdin.cut()  # the command ended: nothing waits on its stdin any more
            if feeder is not None:
                # Bounded: a source that blocks forever must not hang a finished command.
                feeder.join(timeout=kill_grace)
        if feeder is not None:
            feeder.raise_error()
        status = proc.returncode
        # A negative status means "killed by signal -status": no exit status, as over SSH.
        return (status if status >= 0 else None), timed_out

    def get(self, remote: str, local: str | os.PathLike, max_bytes: int) -> int:
        return _copy_file(remote, Path(local), max_bytes, f"{remote} on {self.name}", keep_mode=False)

    def put(self, local: str | os.PathLike, remote: str, max_bytes: int | None = None) -> int:
        if not Path(remote).parent.is_dir():
            # As over SFTP: the destination directory must exist, put does not invent it.
            raise ArtifactError(f"cannot write {remote} on {self.name}: no such directory")
        return _copy_file(local, Path(remote), max_bytes, f"local file {local}", keep_mode=True)

    def close(self) -> None:
        """Nothing to release: every command has its own process."""


def _copy_file(
    source_path: str | os.PathLike, dest: Path, max_bytes: int | None, what: str, keep_mode: bool
) -> int:
    with open_regular_file(source_path, what) as source:
        info = os.fstat(source.fileno())
        check_size(info.st_size, max_bytes, what)
        mode = stat.S_IMODE(info.st_mode) if keep_mode else None
        return receive_atomically(source, dest, max_bytes, what, mode=mode)


def _pump(
    proc: subprocess.Popen, out: OutputHandler, err: LineStream, timeout: float | None, kill_grace: float
) -> bool:
    """Stream the command's output until it has exited and closed both pipes.

    Returns whether the timeout fired (the process group was then killed).
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    timed_out = False
    killed = False
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ, out)
        selector.register(proc.stderr, selectors.EVENT_READ, err)
        while selector.get_map() or proc.poll() is None:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                if not timed_out:
                    timed_out = True
                    _killpg(proc, signal.SIGTERM)
                    deadline = now + kill_grace
                elif not killed:
                    killed = True
                    _killpg(proc, signal.SIGKILL)
                    # Children that left the group may still hold the pipes: stop waiting
                    # for them shortly after the SIGKILL.
                    deadline = now + 1.0
                else:
                    break
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not selector.get_map():
                # Both pipes are closed but the process runs on: just wait for it.
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=wait)
                continue
            for key, _ in selector.select(wait):
                data = os.read(key.fileobj.fileno(), CHUNK)
                if data:
                    key.data.feed(data)
                else:
                    selector.unregister(key.fileobj)
    return timed_out


def _killpg(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


class _StdinFeeder:
    """Streams a byte source into a pipe from a thread, so reading output never waits on it."""

    def __init__(self, pipe: IO[bytes], source: ByteSource):
        self._pipe = pipe
        self._source = source
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="stdin-feeder", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for chunk in iter_chunks(self._source):
                self._pipe.write(chunk)
        except BrokenPipeError:
            pass  # the command exited without reading everything: its status tells why
        except BaseException as exc:  # reported to the caller by raise_error()
            self._error = exc
        finally:
            with contextlib.suppress(BrokenPipeError):
                self._pipe.close()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def raise_error(self) -> None:
        if self._error is not None:
            raise self._error
