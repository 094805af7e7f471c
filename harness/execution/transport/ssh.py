"""The SSH transport (paramiko): verified host keys, key auth, jump hosts, one connection per host.

Commands run in a pty-less ``exec`` channel through a small POSIX ``sh`` wrapper that reports
the remote PID first, so a timeout can kill the command's process group on the host. The
remote login shell must be POSIX-compatible (bash, dash, zsh): the command line is quoted for
it with :func:`remote_command_line`.
"""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import logging
import os
import posixpath
import secrets
import select
import shlex
import socket
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import paramiko
from paramiko.common import OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

from harness.core.outcomes import EnvCategory
from harness.execution.transport.base import (
    Lifeline,
    CHUNK,
    ArtifactError,
    ByteSource,
    LineStream,
    OutputHandler,
    Transport,
    TransportError,
    check_size,
    copy_limited,
    describe_argv,
    iter_chunks,
    open_regular_file,
    receive_atomically,
    remote_command_line,
)

log = logging.getLogger(__name__)

HOST_KEY_POLICIES = ("strict", "accept-new")
DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"
MAX_KEY_BYTES = 1024 * 1024  # an RSA-16384 private key is ~13 KB
MAX_KNOWN_HOSTS_BYTES = 64 * 1024 * 1024
_DEFAULT_IDENTITIES = ("~/.ssh/id_ed25519", "~/.ssh/id_ecdsa", "~/.ssh/id_rsa")
_SSH = EnvCategory.SSH
_NETWORK = EnvCategory.NETWORK
# After SIGKILL, how long to wait for the channel to close before giving up on it.
_KILL_WAIT = 2.0
# How often the output loop wakes without output, to notice deadlines and dead connections.
_POLL = 0.5

# The remote side of every command. ``$0`` is this script itself, the argv follows in "$@".
# sshd already makes each session its own process group; where the shell is not a group
# leader, ``setsid`` makes it one (without forking, so the PID stays). It then prints its PID
# and execs the argv, which keeps that PID: the group to kill on timeout.
_PID_MARK = b"tt-harness-pid "
_WRAPPER = (
    'kill -0 -$$ 2>/dev/null || ! command -v setsid >/dev/null 2>&1 || exec setsid sh -c "$0" "$0" "$@"; '
    'echo "tt-harness-pid $$"; exec "$@"'
)
_SIGNAL_GROUP = 'kill -s "$1" -- "-$2" 2>/dev/null || kill -s "$1" "$2" 2>/dev/null'


@dataclass(frozen=True)
class SshTarget:
    """Where and how to connect: built by the inventory from a host's YAML entry.

    ``host_key_policy`` is ``strict`` (the key must already be in ``known_hosts``) or
    ``accept-new`` (an unknown host's key is trusted once and appended; a changed key is
    still refused). ``jump`` is the host to tunnel through (like ``ssh -J``); its own key is
    checked against its own ``known_hosts``. ``keepalive`` is in seconds, 0 disables it.
    """

    name: str
    address: str
    port: int = 22
    user: str | None = None
    identity_file: str | None = None
    known_hosts: str | None = None  # None: ~/.ssh/known_hosts
    host_key_policy: str = "strict"
    jump: SshTarget | None = None
    connect_timeout: float = 10.0
    keepalive: float = 15.0

    def __post_init__(self) -> None:
        if not self.address:
            raise ValueError(f"{self.name}: empty address")
        if not 0 < self.port < 65536:
            raise ValueError(f"{self.name}: port {self.port} is out of range")
        if self.host_key_policy not in HOST_KEY_POLICIES:
            raise ValueError(
                f"{self.name}: host_key_policy must be one of {', '.join(HOST_KEY_POLICIES)}, "
                f"not {self.host_key_policy!r}"
            )
        if self.connect_timeout <= 0:
            raise ValueError(f"{self.name}: connect_timeout must be positive")
        if self.keepalive < 0:
            raise ValueError(f"{self.name}: keepalive must not be negative")

    @property
    def login(self) -> str:
        return self.user or getpass.getuser()

    @property
    def host_id(self) -> str:
        """The name of this host in known_hosts, as OpenSSH writes it."""
        return self.address if self.port == 22 else f"[{self.address}]:{self.port}"

    @property
    def known_hosts_path(self) -> Path:
        return Path(os.path.expanduser(self.known_hosts or DEFAULT_KNOWN_HOSTS))

    def describe(self) -> str:
        via = f" via {self.jump.name}" if self.jump is not None else ""
        return f"{self.name} ({self.login}@{self.address}:{self.port}{via})"


class SshTransport(Transport):
    """Commands and files on one host over one SSH connection, shared by all threads.

    The connection opens on first use (or :meth:`connect`) and reopens when it died while
    idle; a connection that breaks while a command runs raises :class:`TransportError`
    (the command's fate is unknown, so it is never silently rerun). ``close`` drops the
    connection; using the transport again reconnects.
    """

    def __init__(self, target: SshTarget, *, pool: SshPool | None = None):
        self.target = target
        self.name = target.name
        self._pool = pool
        self._lock = threading.Lock()
        self._conn: paramiko.Transport | None = None
        # Without a pool, the jump connection is this transport's own (it connects lazily too).
        self._own_jump = SshTransport(target.jump) if target.jump is not None and pool is None else None

    def connect(self) -> None:
        """Connect now (verifying the host key and authenticating), or raise TransportError."""
        self._connection()

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            if self._own_jump is not None:
                self._own_jump.close()

    # -- commands --------------------------------------------------------------------------

    def _execute(
        self,
        argv: tuple[str, ...],
        timeout: float | None,
        out: OutputHandler,
        err: LineStream,
        stdin: ByteSource | None,
        kill_grace: float,
    ) -> tuple[int | None, bool]:
        chan = self._session()
        try:
            chan.exec_command(remote_command_line(["sh", "-c", _WRAPPER, _WRAPPER, *argv]))
        except (paramiko.SSHException, EOFError, OSError) as exc:
            chan.close()
            raise self._failure(chan, f"the server refused to run `{describe_argv(argv)}`: {exc}") from None
        stdout = _PidLine(out)
        feeder = _ChannelFeeder(chan, stdin) if stdin is not None else None
        if feeder is None:
            chan.shutdown_write()  # no stdin: the command reads EOF, never waits for input
        finished = False
        try:
            timed_out = self._pump(chan, stdout, err, timeout, kill_grace)
            finished = True
        finally:
            if not finished and stdout.pid is not None and chan.get_transport().is_active():
                # A callback raised or we were interrupted: leave no process behind.
                self._signal(stdout.pid, "KILL")
            chan.close()
            if isinstance(stdin, Lifeline):
                stdin.cut()  # the command ended: nothing waits on its stdin any more
            if feeder is not None:
                feeder.join(timeout=kill_grace)
        stdout.flush()
        if chan.exit_status >= 0:  # paramiko leaves -1 when no exit-status arrived
            status: int | None = chan.exit_status
        else:
            status = None
            if _connection_lost(chan):
                raise self._lost(chan, f"while running `{describe_argv(argv)}`")
        if feeder is not None:
            feeder.raise_error()
        return status, timed_out

    def _pump(
        self, chan: paramiko.Channel, out: _PidLine, err: LineStream, timeout: float | None, kill_grace: float
    ) -> bool:
        """Stream output until the command is done; on timeout TERM then KILL its group."""
        deadline = None if timeout is None else time.monotonic() + timeout
        timed_out = killed = False
        while True:
            if chan.recv_ready():
                out.feed(chan.recv(CHUNK))
            if chan.recv_stderr_ready():
                err.feed(chan.recv_stderr(CHUNK))
            idle = not (chan.recv_ready() or chan.recv_stderr_ready())
            if idle and (chan.closed or (chan.eof_received and chan.status_event.is_set())):
                return timed_out
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                if not timed_out:
                    timed_out = True
                    self._signal(out.pid, "TERM")
                    deadline = now + kill_grace
                elif not killed:
                    killed = True
                    self._signal(out.pid, "KILL")
                    deadline = now + _KILL_WAIT
                else:
                    return timed_out  # something outside the group holds the channel open
            if idle:
                wait = _POLL if deadline is None else min(_POLL, max(0.0, deadline - now))
                select.select([chan], [], [], wait)

    def _signal(self, pid: int | None, signal_name: str) -> None:
        """Send a signal to the remote process group ``pid`` over a second channel."""
        if pid is None:
            return  # the wrapper has not reported its PID: closing the channel is all we can do
        try:
            chan = self._session()
            try:
                chan.exec_command(remote_command_line(["sh", "-c", _SIGNAL_GROUP, "sh", signal_name, str(pid)]))
                chan.shutdown_write()
                chan.status_event.wait(self.target.connect_timeout)
            finally:
                chan.close()
        except (TransportError, paramiko.SSHException, EOFError, OSError) as exc:
            # The output loop notices a dead connection itself; say why the kill did not go out.
            log.warning("%s: could not send SIG%s to remote process %s: %s", self.name, signal_name, pid, exc)

    # -- files -----------------------------------------------------------------------------

    def get(self, remote: str, local: str | os.PathLike, max_bytes: int) -> int:
        what = f"{remote} on {self.name}"
        with self._sftp(f"copying {remote}") as sftp:
            try:
                info = sftp.stat(remote)
            except FileNotFoundError:
                raise ArtifactError(f"{what} does not exist") from None
            except PermissionError:
                raise ArtifactError(f"cannot read {what}: permission denied") from None
            if info.st_mode is None or not stat.S_ISREG(info.st_mode):
                raise ArtifactError(f"{what} is not a regular file")
            check_size(info.st_size, max_bytes, what)
            with sftp.open(remote, "rb") as handle:
                handle.prefetch(info.st_size)  # pipelined reads: the round trip is not per chunk
                return receive_atomically(handle, Path(local), max_bytes, what)

    def put(self, local: str | os.PathLike, remote: str, max_bytes: int | None = None) -> int:
        what = f"local file {local}"
        with open_regular_file(local, what) as source:
            info = os.fstat(source.fileno())
            check_size(info.st_size, max_bytes, what)
            # Written beside the destination, then renamed over it: readers never see half a file.
            tmp = posixpath.join(
                posixpath.dirname(remote), f".{posixpath.basename(remote)}.{secrets.token_hex(4)}.part"
            )
            with self._sftp(f"copying {local} to {remote}") as sftp:
                try:
                    with sftp.open(tmp, "wb") as handle:
                        handle.set_pipelined(True)
                        size = copy_limited(source, handle, max_bytes, what)
                    sftp.chmod(tmp, stat.S_IMODE(info.st_mode))
                    sftp.posix_rename(tmp, remote)
                except BaseException as exc:
                    with contextlib.suppress(OSError, paramiko.SSHException, EOFError):
                        sftp.remove(tmp)
                    if isinstance(exc, OSError) and sftp.get_channel().get_transport().is_active():
                        raise ArtifactError(f"cannot write {remote} on {self.name}: {exc.strerror or exc}") from None
                    raise
            return size

    @contextlib.contextmanager
    def _sftp(self, doing: str) -> Iterator[paramiko.SFTPClient]:
        chan = self._session()
        try:
            chan.invoke_subsystem("sftp")
            sftp = paramiko.SFTPClient(chan)
        except (paramiko.SSHException, EOFError, OSError) as exc:
            chan.close()
            raise self._failure(
                chan, f"the SFTP subsystem is not available ({exc}); enable `Subsystem sftp` in sshd_config"
            ) from None
        try:
            yield sftp
        except (paramiko.SSHException, EOFError) as exc:
            raise self._failure(chan, f"SFTP failed while {doing}: {exc}") from None
        except OSError as exc:
            if _connection_lost(chan):
                raise self._lost(chan, f"while {doing}") from exc
            raise
        finally:
            sftp.close()

    # -- connection ------------------------------------------------------------------------

    def _connection(self) -> paramiko.Transport:
        with self._lock:
            if self._conn is not None and self._conn.is_active():
                return self._conn
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self._conn = self._open()
            return self._conn

    def _session(self) -> paramiko.Channel:
        """A new session channel; reconnects once if the connection died while idle."""
        conn = self._connection()
        try:
            return conn.open_session(timeout=self.target.connect_timeout)
        except (paramiko.SSHException, EOFError, OSError) as exc:
            if conn.is_active():
                raise TransportError(_SSH, f"{self.target.describe()}: the server refused a new session: {exc}") from None
        # It died while idle (sshd restarted, a NAT forgot us); nothing has run yet, so
        # connecting again is safe.
        conn = self._connection()
        try:
            return conn.open_session(timeout=self.target.connect_timeout)
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise TransportError(_SSH, f"{self.target.describe()}: cannot open a session: {exc}") from None

    def _open(self) -> paramiko.Transport:
        target = self.target
        sock = self._open_socket()
        conn = paramiko.Transport(sock)
        try:
            conn.banner_timeout = target.connect_timeout
            conn.auth_timeout = target.connect_timeout
            known = _known_keys(target.known_hosts_path, target.host_id)
            _prefer_key_types(conn, known)
            try:
                conn.start_client(timeout=target.connect_timeout)
            except (paramiko.SSHException, EOFError, OSError) as exc:
                raise TransportError(
                    _SSH, f"{target.describe()}: SSH handshake failed: {exc or type(exc).__name__}"
                ) from None
            if not (conn.is_active() and conn.initial_kex_done):
                # start_client returns quietly when its timeout expires mid-handshake.
                raise TransportError(
                    _SSH,
                    f"{target.describe()}: SSH handshake failed: no SSH answer within "
                    f"{target.connect_timeout:g}s (is this port an SSH server?)",
                )
            _check_host_key(target, known, conn.get_remote_server_key())
            _authenticate(conn, target)
            if target.keepalive:
                conn.set_keepalive(max(1, round(target.keepalive)))
            return conn
        except BaseException:
            conn.close()
            raise

    def _open_socket(self) -> socket.socket | paramiko.Channel:
        target = self.target
        if target.jump is not None:
            return self._open_via_jump()
        where = f"{target.address}:{target.port}"
        try:
            addresses = socket.getaddrinfo(target.address, target.port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise TransportError(_NETWORK, f"{target.describe()}: cannot resolve {target.address}: {exc.strerror}") from None
        failure: OSError | None = None
        for family, kind, proto, _, address in addresses:
            sock = socket.socket(family, kind, proto)
            sock.settimeout(target.connect_timeout)
            try:
                sock.connect(address)
            except OSError as exc:
                sock.close()
                failure = exc
                continue
            if target.keepalive and hasattr(socket, "TCP_USER_TIMEOUT"):
                # paramiko sends a keepalive each interval while idle; a peer that acknowledges
                # nothing for three intervals is dead (like ServerAliveCountMax=3), so a command
                # on a vanished host fails instead of hanging. A slow command cannot trip this:
                # SSH's channel windows throttle data before TCP's window closes.
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, int(target.keepalive * 3000))
            return sock
        if isinstance(failure, ConnectionRefusedError):
            raise TransportError(
                _SSH, f"{target.describe()}: connection refused by {where}: no SSH server listens there (is sshd running, is the port right?)"
            )
        if isinstance(failure, (socket.timeout, TimeoutError)):
            raise TransportError(
                _NETWORK,
                f"{target.describe()}: no answer from {where} within {target.connect_timeout:g}s "
                "(host down, or a firewall drops the connection)",
            )
        reason = failure.strerror if failure is not None and failure.strerror else failure
        raise TransportError(_NETWORK, f"{target.describe()}: cannot connect to {where}: {reason}")

    def _open_via_jump(self) -> paramiko.Channel:
        target = self.target
        assert target.jump is not None
        jump = self._pool.get(target.jump) if self._pool is not None else self._own_jump
        assert jump is not None
        conn = jump._connection()
        where = f"{target.address}:{target.port}"
        try:
            return conn.open_channel(
                "direct-tcpip", (target.address, target.port), ("127.0.0.1", 0), timeout=target.connect_timeout
            )
        except paramiko.ChannelException as exc:
            if exc.code == OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED:
                raise TransportError(
                    _SSH,
                    f"{target.describe()}: jump host {jump.name} refused to forward to {where} ({exc.text}); "
                    "it needs `AllowTcpForwarding yes`",
                ) from None
            # OpenSSH says only "Connect failed": refused and unreachable look the same from here.
            raise TransportError(
                _NETWORK,
                f"{target.describe()}: jump host {jump.name} could not connect to {where} ({exc.text}): the host "
                "is down, unreachable from the jump host, or not running sshd on that port",
            ) from None
        except (paramiko.SSHException, EOFError, OSError) as exc:
            if conn.is_active():
                raise TransportError(
                    _NETWORK, f"{target.describe()}: jump host {jump.name} did not open a tunnel to {where}: {exc}"
                ) from None
            raise TransportError(_SSH, f"{target.describe()}: connection to jump host {jump.name} lost: {exc}") from None

    # -- errors ----------------------------------------------------------------------------

    def _failure(self, chan: paramiko.Channel, message: str) -> TransportError:
        if _connection_lost(chan):
            return self._lost(chan, message)
        return TransportError(_SSH, f"{self.target.describe()}: {message}")

    def _lost(self, chan: paramiko.Channel, doing: str) -> TransportError:
        cause = chan.get_transport().get_exception()
        detail = f" ({cause})" if cause is not None and str(cause) else ""
        return TransportError(_SSH, f"{self.target.describe()}: connection lost {doing}{detail}")


class SshPool:
    """One :class:`SshTransport` per target, shared by every thread; ``close`` ends them all.

    Jump hosts come from the same pool, so many hosts behind one jump share its connection.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._transports: dict[SshTarget, SshTransport] = {}

    def get(self, target: SshTarget) -> SshTransport:
        with self._lock:
            transport = self._transports.get(target)
            if transport is None:
                transport = self._transports[target] = SshTransport(target, pool=self)
            return transport

    def close(self) -> None:
        with self._lock:
            transports, self._transports = list(self._transports.values()), {}
        # Hosts behind a jump first, so their tunnels close before the jump connection does.
        for transport in sorted(transports, key=lambda t: _jump_depth(t.target), reverse=True):
            transport.close()

    def __enter__(self) -> SshPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _jump_depth(target: SshTarget) -> int:
    return 0 if target.jump is None else 1 + _jump_depth(target.jump)


def _connection_lost(chan: paramiko.Channel) -> bool:
    conn = chan.get_transport()
    if conn.is_active() and not chan.eof_received:
        # A channel closed without EOF is how a dying connection looks; paramiko closes the
        # channels just before it marks itself inactive, so give it a moment to get there.
        conn.join(_POLL)
    return not conn.is_active()


class _PidLine:
    """Takes the wrapper's PID line out of stdout and passes everything else on.

    Lines before it (a chatty shell rc file) are output like any other.
    """

    def __init__(self, out: OutputHandler):
        self._out = out
        self._head = bytearray()
        self.pid: int | None = None

    def feed(self, data: bytes) -> None:
        if self.pid is not None:
            self._out.feed(data)
            return
        self._head += data
        start = 0
        while self.pid is None and (end := self._head.find(b"\n", start)) != -1:
            line = bytes(self._head[start:end])
            if line.startswith(_PID_MARK) and line[len(_PID_MARK) :].isdigit():
                self._out.feed(bytes(self._head[:start]))
                self.pid = int(line[len(_PID_MARK) :])
                rest = bytes(self._head[end + 1 :])
                self._head.clear()
                if rest:
                    self._out.feed(rest)
                return
            start = end + 1

    def flush(self) -> None:
        """Hand on anything held back while looking for the PID line."""
        if self._head:
            self._out.feed(bytes(self._head))
            self._head.clear()


class _ChannelFeeder:
    """Streams a byte source into the channel from a thread, then sends EOF."""

    def __init__(self, chan: paramiko.Channel, source: ByteSource):
        self._chan = chan
        self._source = source
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="ssh-stdin-feeder", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for chunk in iter_chunks(self._source):
                try:
                    self._chan.sendall(chunk)
                except (OSError, paramiko.SSHException, EOFError):
                    return  # the command stopped reading (or the connection broke): its result says
        except BaseException as exc:  # the source failed: reported to the caller by raise_error()
            self._error = exc
        finally:
            with contextlib.suppress(OSError, paramiko.SSHException, EOFError):
                self._chan.shutdown_write()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def raise_error(self) -> None:
        if self._error is not None:
            raise self._error


# -- host keys -----------------------------------------------------------------------------

_known_hosts_lock = threading.Lock()


def _known_keys(path: Path, host_id: str) -> dict[str, paramiko.PKey]:
    """The keys ``path`` lists for ``host_id`` (hashed entries included), by key type."""
    keys = paramiko.HostKeys()
    try:
        _small_regular_file(path, MAX_KNOWN_HOSTS_BYTES, "known_hosts file")
        keys.load(str(path))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise TransportError(_SSH, f"cannot read known_hosts file {path}: {exc}") from None
    found = keys.lookup(host_id)
    return {} if found is None else {key_type: found[key_type] for key_type in found.keys()}


def _prefer_key_types(conn: paramiko.Transport, known: dict[str, paramiko.PKey]) -> None:
    """Ask the server for a key type we already know, as OpenSSH does.

    Otherwise a host with several host keys could present one we have not recorded, which
    would look like a changed key.
    """
    if not known:
        return
    wanted: list[str] = []
    for key_type in known:
        wanted += ["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"] if key_type == "ssh-rsa" else [key_type]
    options = conn.get_security_options()
    available = list(options.key_types)
    options.key_types = [k for k in wanted if k in available] + [k for k in available if k not in wanted]


def _check_host_key(target: SshTarget, known: dict[str, paramiko.PKey], key: paramiko.PKey) -> None:
    path = target.known_hosts_path
    if not known:
        if target.host_key_policy != "accept-new":
            raise TransportError(_SSH, _unknown_key_message(target, key))
        known = _append_if_unknown(path, target.host_id, key)
        if not known:
            log.info("%s: trusted new host key %s %s (accept-new), added to %s", target.name, key.get_name(), key.fingerprint, path)
            return
    recorded = known.get(key.get_name())
    if recorded is not None and recorded.asbytes() == key.asbytes():
        return
    # A recorded key of another type counts as changed too: we asked the server for that type
    # first, so a host that no longer offers it is not the host we recorded.
    raise TransportError(_SSH, _changed_key_message(target, known, key))


def _append_if_unknown(path: Path, host_id: str, key: paramiko.PKey) -> dict[str, paramiko.PKey]:
    """Append ``key`` for ``host_id`` unless another process recorded the host meanwhile.

    Returns the keys already recorded (then nothing was written) or ``{}`` after appending.
    One write of one line under an exclusive lock, so concurrent harness runs neither lose
    nor interleave lines; OpenSSH appends to this file the same way.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with _known_hosts_lock:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "r+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            known = _known_keys(path, host_id)
            if known:
                return known
            size = os.fstat(handle.fileno()).st_size
            needs_newline = size > 0 and os.pread(handle.fileno(), 1, size - 1) != b"\n"
            line = f"{host_id} {key.get_name()} {key.get_base64()}\n".encode()
            handle.write((b"\n" if needs_newline else b"") + line)
            handle.flush()
            os.fsync(handle.fileno())
            return {}


def _keyscan_command(target: SshTarget) -> str:
    port = ["-p", str(target.port)] if target.port != 22 else []
    return shlex.join(["ssh-keyscan", *port, target.address])


def _unknown_key_message(target: SshTarget, key: paramiko.PKey) -> str:
    path = target.known_hosts_path
    where = f" on the jump host {target.jump.address}" if target.jump is not None else ""
    return (
        f"{target.describe()}: host key for {target.host_id} is not in {path}; verify the fingerprint "
        f"{key.fingerprint} ({key.get_name()}) and add it with `{_keyscan_command(target)} >> {path}`{where}, "
        "or set `host_key_policy: accept-new` for this host in the inventory"
    )


def _changed_key_message(target: SshTarget, known: dict[str, paramiko.PKey], key: paramiko.PKey) -> str:
    path = target.known_hosts_path
    recorded = ", ".join(f"{k.fingerprint} ({key_type})" for key_type, k in known.items())
    remove = shlex.join(["ssh-keygen", "-f", str(path), "-R", target.host_id])
    return (
        f"{target.describe()}: the host key for {target.host_id} has CHANGED: {path} records {recorded}, "
        f"but the server presented {key.fingerprint} ({key.get_name()}). Someone may be intercepting "
        "the connection (man-in-the-middle), or the host was reinstalled. Find out which before "
        f"connecting; if the change is expected, remove the old key with `{remove}` and add the new "
        "one after verifying its fingerprint"
    )


# -- authentication ------------------------------------------------------------------------


def _authenticate(conn: paramiko.Transport, target: SshTarget) -> None:
    """Public-key auth with the identity file, then ssh-agent keys, then default keys.

    Passphrase-protected key files are skipped (the harness never asks for or stores
    passphrases): such a key must be loaded into ssh-agent.
    """
    user = target.login
    offered: list[str] = []
    notes: list[str] = []
    agent = paramiko.Agent() if os.environ.get("SSH_AUTH_SOCK") else None
    try:
        for label, key in _candidate_keys(target, agent, notes):
            try:
                conn.auth_publickey(user, key)
            except paramiko.BadAuthenticationType as exc:
                allowed = ", ".join(exc.allowed_types) or "nothing"
                raise TransportError(
                    _SSH, f"{target.describe()}: the server does not accept key authentication for {user} (it allows: {allowed})"
                ) from None
            except paramiko.AuthenticationException:
                offered.append(label)
                continue
            except (paramiko.SSHException, EOFError, OSError) as exc:
                offered.append(label)
                if not conn.is_active():
                    notes.append(f"the server closed the connection ({exc or 'too many keys offered?'})")
                    break
                notes.append(f"{label} could not be used: {exc}")
                continue
            if conn.is_authenticated():
                return
            raise TransportError(
                _SSH,
                f"{target.describe()}: the server wants another authentication step for {user} after the key "
                "(multi-factor); the harness authenticates with keys only",
            )
    finally:
        if agent is not None:
            agent.close()
    if not offered:
        problem = "there was no key to offer"
    else:
        problem = f"the server accepted none of the keys offered: {'; '.join(offered)}"
    detail = "".join(f"; {note}" for note in notes)
    raise TransportError(
        _SSH,
        f"{target.describe()}: authentication as {user} failed: {problem}{detail}. Add the public key to "
        f"~{user}/.ssh/authorized_keys on the host, or set identity_file for this host in the inventory "
        "(or load the key into ssh-agent)",
    )


def _candidate_keys(
    target: SshTarget, agent: paramiko.Agent | None, notes: list[str]
) -> Iterator[tuple[str, paramiko.PKey]]:
    if target.identity_file is not None:
        path = Path(os.path.expanduser(target.identity_file))
        if not path.exists():
            raise TransportError(_SSH, f"{target.describe()}: identity file {path} does not exist")
        key = _load_key(path, notes)
        if key is not None:
            yield f"{path} ({key.get_name()} {key.fingerprint})", key
    if agent is not None:
        try:
            agent_keys = agent.get_keys()
        except paramiko.SSHException as exc:
            notes.append(f"ssh-agent could not be asked for keys: {exc}")
            agent_keys = ()
        for key in agent_keys:
            yield f"ssh-agent key ({key.get_name()} {key.fingerprint})", key
    if target.identity_file is None:
        for default in _DEFAULT_IDENTITIES:
            path = Path(os.path.expanduser(default))
            if path.exists():
                key = _load_key(path, notes)
                if key is not None:
                    yield f"{path} ({key.get_name()} {key.fingerprint})", key


def _small_regular_file(path: Path, limit: int, what: str) -> None:
    """Refuse, before reading it, a key or known_hosts "file" that is a device, a FIFO or huge."""
    info = path.stat()
    if not stat.S_ISREG(info.st_mode):
        raise OSError(f"{what} {path} is not a regular file")
    if info.st_size > limit:
        raise OSError(f"{what} {path} is {info.st_size} bytes, more than the {limit} it may be")


def _load_key(path: Path, notes: list[str]) -> paramiko.PKey | None:
    try:
        _small_regular_file(path, MAX_KEY_BYTES, "identity file")
        return paramiko.PKey.from_path(path)
    except (paramiko.PasswordRequiredException, TypeError):
        # cryptography raises TypeError for an encrypted key loaded without a password.
        notes.append(f"{path} is passphrase-protected: load it into ssh-agent with `ssh-add {shlex.quote(str(path))}`")
    except (paramiko.SSHException, ValueError, OSError) as exc:
        notes.append(f"{path} is not a usable private key: {exc}")
    return None
