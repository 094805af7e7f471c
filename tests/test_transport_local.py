"""The local transport's own cases, and the argv quoting every remote command goes through.

The behaviour both transports share (streaming, timeouts, stdin, files) is tested against both
in test_transport_semantics.py.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.execution.transport import ArtifactError, LocalTransport, remote_command_line
from tests.hostile import HOSTILE

SHELLS = sorted({os.path.realpath(s) for s in ("/bin/sh", "/bin/dash", "/bin/bash", "/usr/bin/zsh") if os.path.exists(s)})
# Arguments are exec() strings: any text without NUL (surrogates cannot be encoded).
ARG = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), max_size=40)


def through_shell(shell: str, argv: list[str]) -> bytes:
    """What ``printf '%s\\0' argv...`` prints when a real shell parses our command line."""
    line = remote_command_line(["printf", "%s\\0", *argv])
    return subprocess.run([shell, "-c", line], check=True, capture_output=True, timeout=10).stdout


@pytest.mark.parametrize("shell", SHELLS)
def test_hostile_strings_survive_a_real_shell_verbatim(shell: str, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    args = [arg.replace("MARKER", str(marker)) for arg in HOSTILE]
    assert through_shell(shell, args) == b"".join(arg.encode() + b"\0" for arg in args)
    assert not marker.exists()


def test_quoting_is_shlex_join() -> None:
    assert remote_command_line(["docker", "run", "--rm", "img", "sh", "-c", "a && b"]) == (
        "docker run --rm img sh -c 'a && b'"
    )
    assert remote_command_line(["echo", ""]) == "echo ''"
    with pytest.raises(TypeError):
        remote_command_line("rm -rf /")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="NUL"):
        remote_command_line(["echo", "a\0b"])


@settings(max_examples=200, deadline=None)
@given(st.lists(ARG, min_size=1, max_size=8))
def test_quoting_round_trips_any_text(argv: list[str]) -> None:
    assert shlex.split(remote_command_line(argv)) == argv


@settings(max_examples=40, deadline=None)
@given(st.lists(ARG, min_size=1, max_size=6))
def test_any_text_survives_dash(argv: list[str]) -> None:
    assert through_shell("/bin/sh", argv) == b"".join(arg.encode() + b"\0" for arg in argv)


def test_a_file_that_is_not_executable(tmp_path: Path) -> None:
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    result = LocalTransport().run([str(script)])
    assert result.exit_status == 126
    assert "permission denied" in result.stderr_tail


def test_get_refuses_a_fifo_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(ArtifactError, match="not a regular file"):
        LocalTransport().get(str(fifo), tmp_path / "copy", max_bytes=100)
    assert time.monotonic() - started < 2


def test_the_command_gets_its_own_session(tmp_path: Path) -> None:
    # A session of its own is what lets a timeout kill the command's children as a group.
    result = LocalTransport().run(["sh", "-c", "ps -o pid=,pgid=,sid= -p $$"])
    pid, pgid, sid = result.stdout_tail.split()
    assert pid == pgid == sid


def test_docker_save_into_docker_load_shape(tmp_path: Path) -> None:
    """One command's stdout streamed into another's stdin, as ``docker save | docker load``."""
    payload = os.urandom(2 * 1024 * 1024)
    (tmp_path / "image.tar").write_bytes(payload)
    transport = LocalTransport()
    loader = subprocess.Popen(["sha256sum"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    saved = transport.run(["cat", str(tmp_path / "image.tar")], stdout_sink=loader.stdin)
    loader.stdin.close()
    assert saved.ok
    assert loader.stdout.read().split()[0].decode() == hashlib.sha256(payload).hexdigest()
    loader.wait()
    with open(tmp_path / "image.tar", "rb") as source:
        loaded = transport.run(["sha256sum"], stdin=source)
    assert loaded.stdout_tail.split()[0] == hashlib.sha256(payload).hexdigest()
