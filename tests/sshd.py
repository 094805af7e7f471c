"""A real OpenSSH server on loopback, for tests of anything that talks SSH.

``start_sshd`` runs ``/usr/sbin/sshd -D -e`` as the current user on 127.0.0.1 at a free port,
with its own host key, one authorized client key and a known_hosts file that trusts it. The
``sshd_factory`` and ``sshd`` fixtures wrap it and stop every server after the test.

When sshd is missing or does not start, the fixtures FAIL with the reason, never skip: a CI
run without a working SSH server must not look green.
"""

from __future__ import annotations

import getpass
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterator

import paramiko
import pytest
from harness.execution.transport import SshTarget
from harness.lab.keys import known_hosts_line, write_ed25519_key  # noqa: F401  (re-exported for tests)

SSHD = "/usr/sbin/sshd"
START_TIMEOUT = 10.0
# OpenSSH names its per-connection processes "sshd" (9.7 and older) or "sshd-session"/"sshd-auth".
_SESSION_COMMS = {"sshd", "sshd-session", "sshd-auth"}


@dataclass(frozen=True)
class SshServer:
    """One running sshd. ``target()`` gives an SshTarget that connects to it as the test user."""

    name: str
    port: int
    workdir: Path
    host_key: paramiko.PKey
    client_key: Path
    known_hosts: Path
    log_path: Path
    process: subprocess.Popen

    @property
    def host_id(self) -> str:
        return f"[127.0.0.1]:{self.port}"

    def target(self, **overrides: object) -> SshTarget:
        base = SshTarget(
            name=self.name,
            address="127.0.0.1",
            port=self.port,
            user=getpass.getuser(),
            identity_file=str(self.client_key),
            known_hosts=str(self.known_hosts),
            connect_timeout=5.0,
        )
        return replace(base, **overrides)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def session_pids(self) -> list[int]:
        """The sshd processes serving connections (the listener's sshd descendants)."""
        return [pid for pid in descendants(self.process.pid) if process_comm(pid) in _SESSION_COMMS]

    def drop_connections(self) -> None:
        """Kill every connection's sshd processes, as a crash or a network cut would.

        Commands started over those connections keep running; the listener keeps accepting.
        """
        for pid in self.session_pids():
            _kill(pid, signal.SIGKILL)

    def stop(self) -> None:
        """Kill the server, its connections and everything they started."""
        for pid in descendants(self.process.pid):
            _kill(pid, signal.SIGKILL)
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def start_sshd(workdir: Path, *, name: str = "sshd", extra_config: str = "", port: int | None = None) -> SshServer:
    """Start sshd in ``workdir`` and wait until it answers with an SSH banner.

    Every server gets a new host key; ``port`` reuses a port (a host that came back with a
    new key), otherwise a free one is picked.
    """
    if not os.path.exists(SSHD):
        pytest.fail(f"{SSHD} is not installed: install openssh-server (apt-get install -y openssh-server)", pytrace=False)
    try:
        # The privilege-separation directory sshd insists on; packaging normally creates it.
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    except PermissionError as exc:
        pytest.fail(f"cannot create /run/sshd for sshd's privilege separation: {exc}", pytrace=False)
    workdir.mkdir(parents=True, exist_ok=True)
    host_key_path = workdir / "ssh_host_ed25519_key"
    host_key = write_ed25519_key(host_key_path)
    client_key = workdir / "client_ed25519"
    client = write_ed25519_key(client_key)
    authorized_keys = workdir / "authorized_keys"
    authorized_keys.write_text(f"{client.get_name()} {client.get_base64()} tt-harness-test\n")
    log_path = workdir / "sshd.log"
    failures = []
    for _ in range(1 if port is not None else 3):  # a free port may be taken before sshd binds it
        listen_port = port if port is not None else _free_port()
        config = workdir / "sshd_config"
        # sshd takes the first value of a keyword: the extra settings go first to win.
        config.write_text(extra_config + "\n" + _config(workdir, listen_port, host_key_path, authorized_keys))
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        problem = _wait_until_serving(process, listen_port)
        if problem is None:
            known_hosts = workdir / "known_hosts"
            known_hosts.write_text(known_hosts_line(f"[127.0.0.1]:{listen_port}", host_key))
            return SshServer(name, listen_port, workdir, host_key, client_key, known_hosts, log_path, process)
        if process.poll() is None:
            process.kill()
        process.wait()
        failures.append(f"port {listen_port}: {problem}\n{log_path.read_text(errors='replace')}")
        if "Address already in use" not in failures[-1]:
            break
    pytest.fail("sshd did not start:\n" + "\n".join(failures), pytrace=False)


@pytest.fixture
def sshd_factory(tmp_path: Path) -> Iterator[Callable[..., SshServer]]:
    """Start as many servers as a test needs (``factory(name=..., extra_config=..., port=...)``)."""
    servers: list[SshServer] = []

    def start(name: str = "sshd", extra_config: str = "", port: int | None = None) -> SshServer:
        server = start_sshd(tmp_path / f"sshd-{len(servers)}", name=name, extra_config=extra_config, port=port)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def sshd(sshd_factory: Callable[..., SshServer]) -> SshServer:
    return sshd_factory()


# -- processes -----------------------------------------------------------------------------


def process_alive(pid: int) -> bool:
    """Whether ``pid`` runs: a zombie counts as gone (an orphan may wait long to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def process_comm(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except (FileNotFoundError, ProcessLookupError):
        return None


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _config(workdir: Path, port: int, host_key: Path, authorized_keys: Path) -> str:
    return f"""\
Port {port}
ListenAddress 127.0.0.1
HostKey {host_key}
PidFile {workdir / "sshd.pid"}
AuthorizedKeysFile {authorized_keys}
StrictModes no
UsePAM no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
AllowTcpForwarding yes
Subsystem sftp internal-sftp
MaxAuthTries 10
MaxSessions 64
MaxStartups 64
UseDNS no
PrintMotd no
LogLevel VERBOSE
"""


def _wait_until_serving(process: subprocess.Popen, port: int) -> str | None:
    """None once sshd answers with its banner, else why it did not."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return f"sshd exited with status {process.returncode}"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
                if sock.recv(64).startswith(b"SSH-2.0-"):
                    return None
        except OSError:
            pass
        time.sleep(0.05)
    return f"sshd did not answer on port {port} within {START_TIMEOUT:g}s"
