"""SSH keys for simulated hosts and their clients (the lab's, and the tests' loopback sshd)."""

from __future__ import annotations

import os
from pathlib import Path

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519


def write_ed25519_key(path: Path, comment: str = "tt-harness") -> paramiko.Ed25519Key:
    """A new unencrypted ed25519 private key at ``path`` (0600, OpenSSH format, which paramiko
    reads but cannot write) and its ``.pub`` beside it."""
    private = ed25519.Ed25519PrivateKey.generate()
    path.parent.mkdir(parents=True, exist_ok=True)
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(pem)
    key = paramiko.Ed25519Key.from_private_key_file(str(path))
    path.with_name(path.name + ".pub").write_text(f"{public_line(key)} {comment}\n")
    return key


def public_line(key: paramiko.PKey) -> str:
    """``ssh-ed25519 AAAA...``: the form authorized_keys and known_hosts take."""
    return f"{key.get_name()} {key.get_base64()}"


def known_hosts_line(host_id: str, key: paramiko.PKey) -> str:
    return f"{host_id} {public_line(key)}\n"
