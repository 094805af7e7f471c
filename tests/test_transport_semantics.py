"""What every transport promises, run against both: this machine and a real sshd on loopback."""

from __future__ import annotations

import hashlib
import io
import os
import stat
import threading
import time
import tracemalloc
from pathlib import Path

import pytest

from harness.execution.transport import ArtifactError, LocalTransport, SshTransport, Transport
from tests.hostile import HOSTILE
from tests.sshd import SshServer, process_alive


@pytest.fixture(params=["local", pytest.param("ssh", marks=pytest.mark.ssh)])
def transport(request: pytest.FixtureRequest) -> Transport:
    if request.param == "local":
        return LocalTransport()
    server: SshServer = request.getfixturevalue("sshd")
    ssh = SshTransport(server.target())
    request.addfinalizer(ssh.close)
    return ssh


def wait_for_file(path: Path, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and (text := path.read_text()).endswith("\n"):
            return text
        time.sleep(0.02)
    raise AssertionError(f"{path} was not written within {timeout}s")


def test_streams_lines_and_reports_exit_status(transport: Transport) -> None:
    out: list[str] = []
    err: list[str] = []
    result = transport.run(
        ["sh", "-c", "echo one; echo oops >&2; printf 'two\\r\\nthree'; exit 3"], on_stdout=out.append, on_stderr=err.append
    )
    assert out == ["one", "two", "three"]
    assert err == ["oops"]
    assert result.exit_status == 3 and not result.ok and not result.timed_out
    assert result.stdout_tail == "one\ntwo\nthree"
    assert result.stderr_tail == "oops"
    assert result.argv == ("sh", "-c", "echo one; echo oops >&2; printf 'two\\r\\nthree'; exit 3")


def test_exit_statuses(transport: Transport) -> None:
    assert transport.run(["true"]).ok
    assert transport.run(["sh", "-c", "exit 255"]).exit_status == 255
    missing = transport.run(["no-such-command-tt-harness"])
    assert missing.exit_status == 127
    assert "not found" in missing.stderr_tail
    # Killed by a signal: there is no exit status to report.
    killed = transport.run(["sh", "-c", "kill -KILL $$"])
    assert killed.exit_status is None and not killed.timed_out


def test_tail_keeps_only_the_last_lines(transport: Transport) -> None:
    result = transport.run(["seq", "1", "1000"], tail_lines=3)
    assert result.stdout_tail == "998\n999\n1000"


def test_log_files_get_raw_bytes(transport: Transport, tmp_path: Path) -> None:
    out_log = tmp_path / "logs" / "stdout.log"
    err_log = tmp_path / "logs" / "stderr.log"
    result = transport.run(
        ["sh", "-c", "printf 'a\\nb\\377c'; printf 'e1\\ne2\\n' >&2"], stdout_log=out_log, stderr_log=err_log
    )
    assert result.ok
    assert out_log.read_bytes() == b"a\nb\xffc"
    assert err_log.read_bytes() == b"e1\ne2\n"
    assert result.stdout_tail == "a\nb\ufffdc"  # undecodable bytes are replaced in lines only


def test_hostile_arguments_arrive_verbatim_and_nothing_runs(transport: Transport, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    args = [arg.replace("MARKER", str(marker)) for arg in HOSTILE]
    sink = io.BytesIO()
    result = transport.run(["printf", "%s\\0", *args], stdout_sink=sink)
    assert result.ok, result.stderr_tail
    assert sink.getvalue() == b"".join(arg.encode() + b"\0" for arg in args)
    assert not marker.exists()


def test_timeout_kills_the_whole_process_group(transport: Transport, tmp_path: Path) -> None:
    script = f"echo $$ > {tmp_path}/pid; sleep 60 & echo $! > {tmp_path}/child; wait"
    started = time.monotonic()
    result = transport.run(["sh", "-c", script], timeout=1.0, kill_grace=5.0)
    assert result.timed_out and not result.ok
    assert time.monotonic() - started < 5.0  # SIGTERM sufficed: no wait for the grace period
    pids = [int(wait_for_file(tmp_path / name)) for name in ("pid", "child")]
    deadline = time.monotonic() + 5.0
    while any(process_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(process_alive(pid) for pid in pids), pids


def test_timeout_escalates_to_sigkill(transport: Transport, tmp_path: Path) -> None:
    script = f"trap '' TERM; echo $$ > {tmp_path}/pid; while :; do sleep 0.05; done"
    started = time.monotonic()
    result = transport.run(["sh", "-c", script], timeout=0.5, kill_grace=0.5)
    elapsed = time.monotonic() - started
    assert result.timed_out and result.exit_status is None
    assert 1.0 <= elapsed < 5.0
    pid = int(wait_for_file(tmp_path / "pid"))
    deadline = time.monotonic() + 5.0
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process_alive(pid)


def test_a_failing_callback_leaves_no_process_behind(transport: Transport, tmp_path: Path) -> None:
    def explode(line: str) -> None:
        raise RuntimeError(f"callback failed on {line!r}")

    with pytest.raises(RuntimeError, match="callback failed on 'started'"):
        transport.run(["sh", "-c", f"echo $$ > {tmp_path}/pid; echo started; sleep 60"], on_stdout=explode, timeout=30)
    pid = int(wait_for_file(tmp_path / "pid"))
    deadline = time.monotonic() + 5.0
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process_alive(pid)


def test_large_output_is_streamed_with_bounded_memory(transport: Transport) -> None:
    line = "0123456789" * 10  # 100 characters; 101 bytes with the newline
    count = 500_000  # about 50 MB
    seen = 0
    last = ""

    def on_line(text: str) -> None:
        nonlocal seen, last
        seen += 1
        last = text

    tracemalloc.start()
    try:
        result = transport.run(["sh", "-c", f"yes {line} | head -n {count}"], on_stdout=on_line, timeout=60)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.ok
    assert seen == count and last == line
    assert peak < 16 * 1024 * 1024, f"peak {peak} bytes while streaming 50 MB"


def test_a_line_without_newline_is_handed_on_in_pieces(transport: Transport) -> None:
    pieces: list[str] = []
    result = transport.run(["sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' x"], on_stdout=pieces.append)
    assert result.ok
    assert [len(p) for p in pieces] == [1024 * 1024, 1024 * 1024, 3000000 - 2 * 1024 * 1024]


def test_stdin_is_streamed_into_the_command(transport: Transport) -> None:
    data = os.urandom(5 * 1024 * 1024 + 17)
    result = transport.run(["sha256sum"], stdin=io.BytesIO(data), timeout=60)
    assert result.ok
    assert result.stdout_tail.split()[0] == hashlib.sha256(data).hexdigest()
    chunks = transport.run(["wc", "-c"], stdin=iter([b"abc", b"", b"defg"]))
    assert chunks.stdout_tail.strip() == "7"


def test_without_stdin_a_reading_command_gets_eof(transport: Transport) -> None:
    result = transport.run(["cat"], timeout=10)
    assert result.ok and result.stdout_tail == ""


def test_a_command_that_stops_reading_stdin_does_not_hang(transport: Transport) -> None:
    endless = iter(lambda: b"y" * 65536, None)  # never ends on its own
    result = transport.run(["head", "-c", "10"], stdin=endless, timeout=30, kill_grace=1.0)
    assert result.ok and result.stdout_tail == "y" * 10


def test_a_failing_stdin_source_is_reported(transport: Transport) -> None:
    def source():
        yield b"partial\n"
        raise OSError("the local pipe broke")

    with pytest.raises(OSError, match="the local pipe broke"):
        transport.run(["cat"], stdin=source(), timeout=10)


def test_stdout_to_a_raw_sink(transport: Transport, tmp_path: Path) -> None:
    payload = os.urandom(3 * 1024 * 1024)
    source = tmp_path / "image.tar"
    source.write_bytes(payload)
    sink = io.BytesIO()
    result = transport.run(["cat", str(source)], stdout_sink=sink, timeout=60)
    assert result.ok and result.stdout_tail == ""
    assert sink.getvalue() == payload
    with pytest.raises(ValueError, match="either"):
        transport.run(["true"], stdout_sink=io.BytesIO(), on_stdout=print)


def test_argv_must_be_a_list_of_strings(transport: Transport) -> None:
    with pytest.raises(TypeError, match="argv list"):
        transport.run("echo hi")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="strings"):
        transport.run(["echo", 3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="NUL"):
        transport.run(["echo", "a\0b"])
    with pytest.raises(ValueError, match="empty"):
        transport.run([])


def test_get_copies_within_the_size_limit(transport: Transport, tmp_path: Path) -> None:
    remote = tmp_path / "remote" / "report.xml"
    remote.parent.mkdir()
    payload = os.urandom(1_000_000)
    remote.write_bytes(payload)
    local = tmp_path / "local" / "deep" / "report.xml"
    assert transport.get(str(remote), local, max_bytes=len(payload)) == len(payload)
    assert local.read_bytes() == payload
    assert sorted(p.name for p in local.parent.iterdir()) == ["report.xml"]  # no temp file left


def test_get_refuses_over_the_limit_and_leaves_nothing(transport: Transport, tmp_path: Path) -> None:
    remote = tmp_path / "big.bin"
    remote.write_bytes(b"x" * 1001)
    local = tmp_path / "out" / "big.bin"
    with pytest.raises(ArtifactError, match="1001 bytes, over the limit of 1000 bytes"):
        transport.get(str(remote), local, max_bytes=1000)
    assert not local.parent.exists() or list(local.parent.iterdir()) == []


def test_get_keeps_an_existing_file_when_refusing(transport: Transport, tmp_path: Path) -> None:
    (tmp_path / "big.bin").write_bytes(b"x" * 50)
    local = tmp_path / "kept.bin"
    local.write_bytes(b"old")
    with pytest.raises(ArtifactError):
        transport.get(str(tmp_path / "big.bin"), local, max_bytes=10)
    assert local.read_bytes() == b"old"


def test_get_reports_missing_files_and_directories(transport: Transport, tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match="does not exist"):
        transport.get(str(tmp_path / "missing.xml"), tmp_path / "x", max_bytes=100)
    with pytest.raises(ArtifactError, match="not a regular file"):
        transport.get(str(tmp_path), tmp_path / "x", max_bytes=100)


def test_put_copies_contents_and_mode_atomically(transport: Transport, tmp_path: Path) -> None:
    local = tmp_path / "script.sh"
    local.write_bytes(b"#!/bin/sh\necho from-put\n")
    local.chmod(0o750)
    remote_dir = tmp_path / "remote"
    remote_dir.mkdir()
    remote = remote_dir / "script.sh"
    remote.write_text("old version")
    assert transport.put(local, str(remote)) == local.stat().st_size
    assert remote.read_bytes() == local.read_bytes()
    assert stat.S_IMODE(remote.stat().st_mode) == 0o750
    assert [p.name for p in remote_dir.iterdir()] == ["script.sh"]
    assert transport.run([str(remote)]).stdout_tail == "from-put"


def test_put_enforces_its_limit_and_reports_problems(transport: Transport, tmp_path: Path) -> None:
    local = tmp_path / "input.mlir"
    local.write_bytes(b"y" * 20)
    with pytest.raises(ArtifactError, match="over the limit of 10 bytes"):
        transport.put(local, str(tmp_path / "copy"), max_bytes=10)
    assert not (tmp_path / "copy").exists()
    with pytest.raises(ArtifactError, match="does not exist"):
        transport.put(tmp_path / "missing", str(tmp_path / "copy"))


def test_concurrent_commands_on_one_transport(transport: Transport) -> None:
    results: dict[int, str] = {}
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            results[n] = transport.run(["sh", "-c", f"sleep 0.2; echo {n}"], timeout=30).stdout_tail
        except BaseException as exc:  # collected and asserted on below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert results == {n: str(n) for n in range(8)}


def test_put_needs_an_existing_directory(transport: Transport, tmp_path: Path) -> None:
    local = tmp_path / "input.mlir"
    local.write_bytes(b"module {}\n")
    with pytest.raises(ArtifactError, match="cannot write"):
        transport.put(local, str(tmp_path / "no-such-dir" / "input.mlir"))


def test_a_command_that_closes_its_output_is_still_waited_for(transport: Transport) -> None:
    result = transport.run(["sh", "-c", "exec >&- 2>&-; sleep 0.3; exit 4"], timeout=30)
    assert result.exit_status == 4 and not result.timed_out


def test_timeout_returns_even_if_an_escaped_process_holds_the_output(transport: Transport, tmp_path: Path) -> None:
    # setsid puts the sleep outside the command's process group, out of reach of the kill,
    # while it keeps the output open: the transport must give up on it instead of hanging.
    script = f"setsid sh -c 'echo $$ > {tmp_path}/escaped; exec sleep 30' & wait"
    started = time.monotonic()
    try:
        result = transport.run(["sh", "-c", script], timeout=0.5, kill_grace=0.5)
        assert result.timed_out
        assert time.monotonic() - started < 6.0
    finally:
        os.kill(int(wait_for_file(tmp_path / "escaped")), 9)
