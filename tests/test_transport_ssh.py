"""The SSH transport against real OpenSSH servers on loopback: trust, auth, failures, jumps."""

from __future__ import annotations

import base64
import getpass
import os
import socket
import stat
import subprocess
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

import paramiko
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from harness.core.outcomes import EnvCategory, Outcome
from harness.execution.transport import SshPool, SshTarget, SshTransport, TransportError
from tests.sshd import SshServer, known_hosts_line, write_ed25519_key

pytestmark = pytest.mark.ssh


def connect_error(target: SshTarget) -> TransportError:
    transport = SshTransport(target)
    try:
        with pytest.raises(TransportError) as caught:
            transport.connect()
    finally:
        transport.close()
    return caught.value


def public_key(private: ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey) -> paramiko.PKey:
    line = private.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    key_type, blob = line.split()[:2]
    return paramiko.PKey.from_type_string(key_type.decode(), base64.b64decode(blob))


def other_ed25519_key() -> paramiko.PKey:
    return public_key(ed25519.Ed25519PrivateKey.generate())


# -- host keys -----------------------------------------------------------------------------


def test_unknown_host_key_is_refused_with_instructions(sshd: SshServer, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    error = connect_error(sshd.target(known_hosts=str(empty)))
    assert error.category is EnvCategory.SSH
    message = str(error)
    assert f"host key for [127.0.0.1]:{sshd.port} is not in {empty}" in message
    assert f"verify the fingerprint {sshd.host_key.fingerprint}" in message
    assert f"`ssh-keyscan -p {sshd.port} 127.0.0.1 >> {empty}`" in message
    assert "host_key_policy: accept-new" in message
    assert empty.read_text() == ""  # strict never writes


def test_a_missing_known_hosts_file_means_unknown(sshd: SshServer, tmp_path: Path) -> None:
    error = connect_error(sshd.target(known_hosts=str(tmp_path / "nope" / "known_hosts")))
    assert "is not in" in str(error)
    assert not (tmp_path / "nope").exists()


def test_accept_new_trusts_once_and_records_the_key(sshd: SshServer, tmp_path: Path) -> None:
    known = tmp_path / "fresh" / "known_hosts"
    with SshTransport(sshd.target(known_hosts=str(known), host_key_policy="accept-new")) as transport:
        assert transport.run(["echo", "hi"]).stdout_tail == "hi"
    assert known.read_text() == known_hosts_line(sshd.host_id, sshd.host_key)
    assert stat.S_IMODE(known.stat().st_mode) == 0o600
    # From now on the recorded key is what strict checking compares against.
    with SshTransport(sshd.target(known_hosts=str(known))) as transport:
        assert transport.run(["true"]).ok
    assert known.read_text() == known_hosts_line(sshd.host_id, sshd.host_key)


def test_accept_new_appends_after_existing_entries(sshd: SshServer, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    other = known_hosts_line("other.example", other_ed25519_key())
    known.write_text(other.rstrip("\n"))  # no final newline: the new line must not be glued on
    with SshTransport(sshd.target(known_hosts=str(known), host_key_policy="accept-new")) as transport:
        transport.connect()
    assert known.read_text() == other + known_hosts_line(sshd.host_id, sshd.host_key)


@pytest.mark.parametrize("policy", ["strict", "accept-new"])
def test_changed_host_key_is_refused_as_possible_mitm(sshd: SshServer, tmp_path: Path, policy: str) -> None:
    old = other_ed25519_key()
    known = tmp_path / "known_hosts"
    known.write_text(known_hosts_line(sshd.host_id, old))
    error = connect_error(sshd.target(known_hosts=str(known), host_key_policy=policy))
    assert error.category is EnvCategory.SSH
    message = str(error)
    assert f"host key for [127.0.0.1]:{sshd.port} has CHANGED" in message
    assert f"records {old.fingerprint} (ssh-ed25519)" in message
    assert f"presented {sshd.host_key.fingerprint} (ssh-ed25519)" in message
    assert "man-in-the-middle" in message
    assert f"`ssh-keygen -f {known} -R '[127.0.0.1]:{sshd.port}'`" in message
    assert known.read_text() == known_hosts_line(sshd.host_id, old)  # never overwritten


def test_changed_key_from_a_restarted_server_on_the_same_port(sshd_factory: Callable[..., SshServer]) -> None:
    """The realistic case: the host was reinstalled and came back with a new key."""
    old = sshd_factory()
    target = old.target()
    with SshTransport(target) as transport:
        transport.connect()
    old.stop()
    new = sshd_factory(port=old.port)
    error = connect_error(target)
    assert "has CHANGED" in str(error)
    assert f"records {old.host_key.fingerprint}" in str(error)
    assert f"presented {new.host_key.fingerprint}" in str(error)


def test_a_recorded_key_of_another_type_counts_as_changed(sshd: SshServer, tmp_path: Path) -> None:
    ecdsa = public_key(ec.generate_private_key(ec.SECP256R1()))
    known = tmp_path / "known_hosts"
    known.write_text(known_hosts_line(sshd.host_id, ecdsa))
    error = connect_error(sshd.target(known_hosts=str(known), host_key_policy="accept-new"))
    assert "has CHANGED" in str(error)
    assert "(ecdsa-sha2-nistp256)" in str(error)


def test_hashed_known_hosts_entries_are_honoured(sshd: SshServer, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    hashed = paramiko.HostKeys.hash_host(sshd.host_id)
    known.write_text(known_hosts_line(hashed, sshd.host_key))
    with SshTransport(sshd.target(known_hosts=str(known))) as transport:
        assert transport.run(["true"]).ok


# -- authentication ------------------------------------------------------------------------


def test_wrong_key_fails_authentication_clearly(sshd: SshServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    wrong = write_ed25519_key(tmp_path / "wrong_key")
    error = connect_error(sshd.target(identity_file=str(tmp_path / "wrong_key")))
    assert error.category is EnvCategory.SSH
    message = str(error)
    assert "authentication as " in message and " failed" in message
    assert f"{tmp_path / 'wrong_key'} (ssh-ed25519 {wrong.fingerprint})" in message
    assert "authorized_keys" in message


def test_missing_and_encrypted_identity_files(sshd: SshServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    missing = connect_error(sshd.target(identity_file=str(tmp_path / "absent")))
    assert f"identity file {tmp_path / 'absent'} does not exist" in str(missing)

    secret = "correct horse battery staple"
    private = ed25519.Ed25519PrivateKey.generate()
    encrypted = tmp_path / "encrypted_key"
    encrypted.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.BestAvailableEncryption(secret.encode()),
        )
    )
    error = connect_error(sshd.target(identity_file=str(encrypted)))
    assert "passphrase-protected" in str(error) and "ssh-add" in str(error)
    assert "no key to offer" in str(error)
    assert secret not in str(error)


def test_keys_from_ssh_agent(sshd: SshServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no default ~/.ssh/id_* keys to fall back on
    socket_path = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(socket_path)], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not socket_path.exists():
            assert time.monotonic() < deadline, "ssh-agent did not start"
            time.sleep(0.02)
        monkeypatch.setenv("SSH_AUTH_SOCK", str(socket_path))
        no_key = connect_error(sshd.target(identity_file=None))
        assert "there was no key to offer" in str(no_key)
        subprocess.run(["ssh-add", str(sshd.client_key)], check=True, capture_output=True, timeout=10)
        with SshTransport(sshd.target(identity_file=None)) as transport:
            assert transport.run(["echo", "via agent"]).stdout_tail == "via agent"
    finally:
        agent.kill()
        agent.wait()


# -- reaching the host ---------------------------------------------------------------------


def test_connection_refused_is_an_ssh_fault(sshd: SshServer) -> None:
    sshd.stop()
    error = connect_error(sshd.target())
    assert error.category is EnvCategory.SSH
    assert f"connection refused by 127.0.0.1:{sshd.port}" in str(error)
    verdict = error.verdict()
    assert verdict.outcome is Outcome.ENV_FAULT and verdict.category is EnvCategory.SSH


def test_unresolvable_name_is_a_network_fault(sshd: SshServer) -> None:
    error = connect_error(sshd.target(address="no-such-host.invalid"))
    assert error.category is EnvCategory.NETWORK
    assert "cannot resolve no-such-host.invalid" in str(error)


def test_connect_timeout_is_a_network_fault(sshd: SshServer) -> None:
    # A listener whose accept queue is full drops new SYNs: the connect gets no answer.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)):
            started = time.monotonic()
            error = connect_error(sshd.target(port=port, connect_timeout=0.5))
    assert error.category is EnvCategory.NETWORK
    assert "no answer from 127.0.0.1" in str(error) and "within 0.5s" in str(error)
    assert time.monotonic() - started < 3


def test_a_port_that_does_not_speak_ssh(sshd: SshServer) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(5)
        started = time.monotonic()
        error = connect_error(sshd.target(port=listener.getsockname()[1], connect_timeout=1.0))
    assert error.category is EnvCategory.SSH
    assert "SSH handshake failed" in str(error)
    assert time.monotonic() - started < 5


def test_connection_lost_mid_command_then_reconnects(sshd: SshServer, tmp_path: Path) -> None:
    transport = SshTransport(sshd.target())
    outcome: list[BaseException | object] = []

    def run() -> None:
        try:
            outcome.append(transport.run(["sh", "-c", f"echo $$ > {tmp_path}/pid; exec sleep 30"]))
        except BaseException as exc:  # asserted on below
            outcome.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    try:
        deadline = time.monotonic() + 10
        while not (tmp_path / "pid").exists():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        sshd.drop_connections()
        worker.join(10)
        assert not worker.is_alive(), "the transport did not notice the dropped connection"
        (error,) = outcome
        assert isinstance(error, TransportError)
        assert error.category is EnvCategory.SSH
        assert "connection lost while running `sh -c" in str(error)
        # The next command gets a new connection.
        assert transport.run(["echo", "again"]).stdout_tail == "again"
    finally:
        transport.close()
        os.kill(int((tmp_path / "pid").read_text()), 9)


# -- jump hosts ----------------------------------------------------------------------------


def test_jump_host_reaches_the_target_through_a_tunnel(sshd_factory: Callable[..., SshServer]) -> None:
    jump = sshd_factory(name="jump", extra_config="LogLevel DEBUG1")
    target = sshd_factory(name="card")
    with SshTransport(target.target(jump=jump.target())) as transport:
        result = transport.run(["sh", "-c", "echo $SSH_CONNECTION"])
    assert result.ok
    assert f"target 127.0.0.1 port {target.port}" in jump.log()  # the jump opened the tunnel


def test_jump_host_keys_are_verified_too(sshd_factory: Callable[..., SshServer], tmp_path: Path) -> None:
    jump = sshd_factory(name="jump")
    target = sshd_factory(name="card")
    (tmp_path / "empty").write_text("")
    error = connect_error(target.target(jump=jump.target(known_hosts=str(tmp_path / "empty"))))
    assert error.category is EnvCategory.SSH
    assert f"jump ({getpass.getuser()}@127.0.0.1:{jump.port})" in str(error)
    assert f"[127.0.0.1]:{jump.port} is not in" in str(error)

    unknown_behind_jump = connect_error(target.target(jump=jump.target(), known_hosts=str(tmp_path / "empty")))
    assert f"[127.0.0.1]:{target.port} is not in" in str(unknown_behind_jump)
    assert "on the jump host 127.0.0.1" in str(unknown_behind_jump)


def test_jump_host_failures(sshd_factory: Callable[..., SshServer]) -> None:
    closed_jump = sshd_factory(name="closed-jump", extra_config="AllowTcpForwarding no")
    jump = sshd_factory(name="jump")
    target = sshd_factory(name="card")
    refused = connect_error(target.target(jump=closed_jump.target()))
    assert refused.category is EnvCategory.SSH
    assert "jump host closed-jump refused to forward" in str(refused)
    assert "AllowTcpForwarding" in str(refused)

    target.stop()
    down = connect_error(target.target(jump=jump.target()))
    assert down.category is EnvCategory.NETWORK
    assert f"jump host jump could not connect to 127.0.0.1:{target.port}" in str(down)


# -- the pool ------------------------------------------------------------------------------


def test_pool_shares_one_connection_per_host(sshd_factory: Callable[..., SshServer]) -> None:
    jump = sshd_factory(name="jump")
    first = sshd_factory(name="card-1")
    second = sshd_factory(name="card-2")
    with SshPool() as pool:
        targets = [first.target(jump=jump.target()), second.target(jump=jump.target())]
        assert pool.get(targets[0]) is pool.get(replace(targets[0]))
        errors: list[BaseException] = []

        def work(target: SshTarget, n: int) -> None:
            try:
                assert pool.get(target).run(["echo", str(n)]).stdout_tail == str(n)
            except BaseException as exc:  # asserted on below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(targets[n % 2], n)) for n in range(10)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors
    for server in (jump, first, second):
        assert server.log().count("Accepted publickey") == 1, server.name


def test_closing_a_transport_drops_the_connection_and_reuse_reconnects(sshd: SshServer) -> None:
    transport = SshTransport(sshd.target())
    transport.connect()
    transport.close()
    transport.close()  # idempotent
    assert transport.run(["echo", "back"]).stdout_tail == "back"
    transport.close()
    assert sshd.log().count("Accepted publickey") == 2


def test_the_pid_line_is_found_among_shell_startup_noise() -> None:
    """A chatty rc file on the host may print before the wrapper reports its PID."""
    from harness.execution.transport.base import LineStream
    from harness.execution.transport.ssh import _PidLine

    lines: list[str] = []
    stdout = _PidLine(LineStream(lines.append, None, 10))
    for chunk in (b"Welcome to lab-", b"n150\ntt-harness-p", b"id 4242\nfirst", b" line\n", b"tt-harness-pid 7\n"):
        stdout.feed(chunk)
    assert stdout.pid == 4242
    assert lines == ["Welcome to lab-n150", "first line", "tt-harness-pid 7"]
