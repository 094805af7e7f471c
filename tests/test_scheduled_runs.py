"""`harness run` as a scheduled job: plain log lines, the run lock, per-run reports and retention.

Every run here is a real `harness run` process on this machine (no card: preflight fails, so a
run is a quick `env_fault`, exit 3), and every lock holder a real process: one holding, one
arriving, one SIGKILLed, one dead with a leftover child still holding the lock.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness.orchestration import retention, runlock

REPO = Path(__file__).resolve().parents[1]
JOB = REPO / "jobs" / "layernorm-bw.yaml"
JOB_NAME = "layernorm-bw"
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ ")
RUN_ID = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]{6}$")


def harness_run(out: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TT_HARNESS_INVENTORY"}
    return subprocess.run(
        [sys.executable, "-m", "harness", "run", str(JOB), "--out", str(out), *args],
        cwd=REPO, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
    )


HOLDER = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from harness.orchestration.runlock import acquire
    lock = acquire(Path(sys.argv[1]), sys.argv[2])
    if sys.argv[3] == "fork":            # leave a child holding the lock, then die
        if os.fork() == 0:
            print("child", os.getpid(), flush=True)
            time.sleep(600)
            os._exit(0)
        time.sleep(0.2)
        os._exit(0)
    print("held", flush=True)
    sys.stdin.readline()                 # hold until told
    lock.release()
    print("released", flush=True)
    sys.stdin.readline()
""")


def start_holder(out: Path, mode: str = "hold") -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(out), JOB_NAME, mode], cwd=REPO,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def the_runs(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir() if RUN_ID.match(p.name) and not p.is_symlink())


# ------------------------------------------------------------------------------------------------
# plain log lines


def test_a_run_without_a_tty_logs_plain_timestamped_lines_and_keeps_its_reports(tmp_path):
    out = tmp_path / "out"
    result = harness_run(out)
    assert result.returncode == 3, result.stderr
    lines = result.stderr.splitlines()
    assert lines and all(STAMP.match(line) for line in lines), result.stderr
    assert "\x1b" not in result.stderr + result.stdout  # no ANSI table in a journal
    assert any(re.search(r"localhost layernorm-bw-nightly finished: env_fault/driver-missing", l) for l in lines)
    assert re.search(r"run \S+ finished: exit 3", lines[-1])
    # The run's own folder: marker, JUnit and summary; `latest` points at it.
    (run_id,) = the_runs(out)
    assert os.readlink(out / "latest") == run_id
    summary = json.loads((out / "latest" / "summary.json").read_text())
    assert summary["run_id"] == run_id and summary["exit_code"] == 3
    assert (out / run_id / "junit.xml").read_text() == (out / "junit.xml").read_text()
    assert json.loads((out / run_id / retention.MARKER).read_text()) == {"job": JOB_NAME, "run_id": run_id}
    assert (out / f".tt-harness-{JOB_NAME}.lock").read_bytes() == b""  # released cleanly


# ------------------------------------------------------------------------------------------------
# the run lock, with real processes


def test_an_overlapping_run_exits_4_naming_the_holder_and_runs_nothing(tmp_path):
    out = tmp_path / "out"
    holder = start_holder(out)
    try:
        started = time.monotonic()
        result = harness_run(out)
        assert result.returncode == 4, result.stderr
        assert time.monotonic() - started < 20  # at once, not after a wait
        (line,) = result.stderr.splitlines()
        assert STAMP.match(line)
        assert f"another run holds {out}/.tt-harness-{JOB_NAME}.lock (pid {holder.pid} on {socket.gethostname()}, started " in line
        assert "nothing ran (exit 4); --lock-wait SECONDS waits for it" in line
        assert not (out / "summary.json").exists() and the_runs(out) == []
    finally:
        holder.kill()
        holder.wait()


def test_with_lock_wait_the_second_run_waits_for_the_first_then_runs(tmp_path):
    out = tmp_path / "out"
    holder = start_holder(out)
    try:
        arrival = subprocess.Popen(
            [sys.executable, "-m", "harness", "run", str(JOB), "--out", str(out), "--lock-wait", "60"],
            cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={k: v for k, v in os.environ.items() if k != "TT_HARNESS_INVENTORY"},
        )
        # It announces the wait, then sits on the lock while the holder holds it.
        first = arrival.stderr.readline()
        assert "waiting up to 60 s for the run lock" in first and f"pid {holder.pid}" in first, first
        time.sleep(1.0)
        assert arrival.poll() is None and the_runs(out) == []
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "released"
        _, rest = arrival.communicate(timeout=60)
        assert arrival.returncode == 3, rest
        assert "stale" not in rest  # a clean release is not a stale lock
        assert len(the_runs(out)) == 1
    finally:
        holder.kill()
        holder.wait()


def test_lock_wait_runs_out_with_exit_4(tmp_path):
    out = tmp_path / "out"
    holder = start_holder(out)
    try:
        started = time.monotonic()
        result = harness_run(out, "--lock-wait", "1.5")
        assert result.returncode == 4, result.stderr
        assert 1.4 < time.monotonic() - started < 30
        assert "after waiting 2 s" in result.stderr or "after waiting 1 s" in result.stderr
        assert "--lock-wait SECONDS waits" not in result.stderr
    finally:
        holder.kill()
        holder.wait()


def test_a_sigkilled_holder_leaves_a_stale_lock_that_is_reported_and_taken_over(tmp_path):
    out = tmp_path / "out"
    holder = start_holder(out)
    lock = runlock.lock_path(out, JOB_NAME)
    assert json.loads(lock.read_text())["pid"] == holder.pid
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    result = harness_run(out)
    assert result.returncode == 3, result.stderr
    (stale,) = [line for line in result.stderr.splitlines() if "stale" in line]
    assert STAMP.match(stale)
    assert f"stale lock of a run that did not end cleanly (pid {holder.pid} on {socket.gethostname()}" in stale
    assert "taking it over" in stale
    assert len(the_runs(out)) == 1 and lock.read_bytes() == b""


def test_a_dead_holder_whose_child_keeps_the_lock_is_taken_over(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(out), JOB_NAME, "fork"], cwd=REPO,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    child = int(proc.stdout.readline().split()[1])
    proc.wait()
    try:
        assert json.loads(runlock.lock_path(out, JOB_NAME).read_text())["pid"] == proc.pid  # dead
        os.kill(child, 0)  # alive, holding the flock through the inherited descriptor
        result = harness_run(out)
        assert result.returncode == 3, result.stderr
        assert f"its holder (pid {proc.pid} on {socket.gethostname()}" in result.stderr
        assert "is dead but a leftover process keeps the lock open; taking it over" in result.stderr
        # A second run finds the new lock file free: the leftover holds only the unlinked one.
        assert harness_run(out).returncode == 3
    finally:
        os.kill(child, signal.SIGKILL)


def test_a_holder_on_another_host_is_obeyed(tmp_path):
    out = tmp_path / "out"
    holder = start_holder(out)
    try:
        # The same folder seen from two machines (a shared file system): this one cannot check
        # the other's pid, so the lock stands.
        lock = runlock.lock_path(out, JOB_NAME)
        record = json.loads(lock.read_text())
        record.update(host="lab-ctl-02", pid=1)
        with open(lock, "r+") as handle:  # rewrite in place: the holder's flock stays
            handle.truncate(0)
            handle.write(json.dumps(record))
        result = harness_run(out)
        assert result.returncode == 4
        assert "(pid 1 on lab-ctl-02, started " in result.stderr
    finally:
        holder.kill()
        holder.wait()


def test_another_job_or_another_out_folder_is_not_locked_out(tmp_path):
    holder = start_holder(tmp_path / "out")
    try:
        assert harness_run(tmp_path / "elsewhere").returncode == 3
        other = runlock.acquire(tmp_path / "out", "device-smoke")
        other.release()
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_file_that_is_a_symlink_or_a_folder_is_refused_with_exit_2(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    target = tmp_path / "precious"
    target.write_text("keep me")
    runlock.lock_path(out, JOB_NAME).symlink_to(target)
    result = harness_run(out)
    assert result.returncode == 2
    assert "is a symbolic link: refused" in result.stderr and "Traceback" not in result.stderr
    assert target.read_text() == "keep me"
    runlock.lock_path(out, JOB_NAME).unlink()
    runlock.lock_path(out, JOB_NAME).mkdir()
    result = harness_run(out)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f".tt-harness-{JOB_NAME}.lock" in result.stderr


def test_holder_death_is_told_by_pid_start_time_and_boot():
    me = runlock.Holder.me(JOB_NAME)
    assert not me.dead()
    assert runlock.Holder(me.pid, me.host, me.started, boot_id=me.boot_id, start_ticks=me.start_ticks + 1).dead()  # pid reused
    assert runlock.Holder(me.pid, me.host, me.started, boot_id="another-boot", start_ticks=me.start_ticks).dead()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert runlock.Holder(gone.pid, me.host, me.started).dead()
    assert not runlock.Holder(gone.pid, "some-other-host", me.started).dead()
    assert runlock.Holder.parse(b"garbage") is None and runlock.Holder.parse(b"") is None
    assert runlock.Holder.parse(json.dumps({"pid": -5, "host": "h", "started": "t"}).encode()) is None


# ------------------------------------------------------------------------------------------------
# retention


def test_keep_prunes_only_the_harness_run_folders_of_this_job(tmp_path):
    out = tmp_path / "out"
    for _ in range(3):
        assert harness_run(out).returncode == 3
    oldest, middle, newest = the_runs(out)
    # What a user (or another job) keeps beside the runs, none of which may be touched:
    (out / "notes.txt").write_text("mine")
    (out / "20200101T000000Z-abcdef").mkdir()  # looks like a run, has no marker
    (out / "20200101T000000Z-abcdef" / "data").write_text("mine")
    fake = out / "20200102T000000Z-abcdef"  # a marker naming another folder: not this one
    fake.mkdir()
    (fake / retention.MARKER).write_text(json.dumps({"job": JOB_NAME, "run_id": oldest}))
    other_job = out / "20200103T000000Z-abcdef"  # another job's run in the same folder
    retention.mark_run(other_job, "device-smoke", other_job.name)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("mine")
    retention.mark_run(outside / "20200104T000000Z-abcdef", JOB_NAME, "20200104T000000Z-abcdef")
    (out / "20200104T000000Z-abcdef").symlink_to(outside / "20200104T000000Z-abcdef")  # a link to a marked run
    (out / oldest / "link-out").symlink_to(outside)  # a link inside a run to be pruned
    marker_link = out / "20200105T000000Z-abcdef"  # the marker itself a link
    marker_link.mkdir()
    (marker_link / retention.MARKER).symlink_to(out / oldest / retention.MARKER)

    result = harness_run(out, "--keep", "2")
    assert result.returncode == 3, result.stderr
    (fourth,) = set(the_runs(out)) - {oldest, middle, newest, "20200101T000000Z-abcdef", "20200102T000000Z-abcdef",
                                      "20200103T000000Z-abcdef", "20200104T000000Z-abcdef", "20200105T000000Z-abcdef"}
    # Kept: the 2 newest runs (the new one included); removed: the 2 older, said in the log.
    assert not (out / oldest).exists() and not (out / middle).exists()
    assert (out / newest).is_dir() and os.readlink(out / "latest") == fourth
    (line,) = [l for l in result.stderr.splitlines() if "removed" in l]
    assert STAMP.match(line) and f"removed 2 old run folder(s) of {out} (--keep 2): {oldest}, {middle}" in line
    # Untouched:
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "20200101T000000Z-abcdef" / "data").read_text() == "mine"
    assert (fake / retention.MARKER).exists()
    assert (other_job / retention.MARKER).exists()
    assert (outside / "precious").read_text() == "mine"
    assert (outside / "20200104T000000Z-abcdef" / retention.MARKER).exists()
    assert (out / "20200104T000000Z-abcdef").is_symlink()
    assert (marker_link / retention.MARKER).is_symlink()
    # The current reports are still where CI looks for them.
    assert json.loads((out / "summary.json").read_text())["run_id"] == fourth


def test_a_latest_that_is_not_a_link_is_left_alone(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "latest").mkdir()
    (out / "latest" / "mine").write_text("mine")
    result = harness_run(out)
    assert result.returncode == 3
    assert "retention: " in result.stderr and "is not a symbolic link: left alone" in result.stderr
    assert (out / "latest" / "mine").read_text() == "mine"


def test_prune_keeps_the_current_run_and_refuses_zero(tmp_path):
    for name in ("20260101T000000Z-000001", "20260102T000000Z-000002", "20260103T000000Z-000003"):
        retention.mark_run(tmp_path / name, JOB_NAME, name)
    pruned = retention.prune(tmp_path, JOB_NAME, 1, current="20260101T000000Z-000001")
    assert pruned.removed == ("20260102T000000Z-000002",) and not pruned.problems
    assert retention.runs(tmp_path, JOB_NAME) == ["20260101T000000Z-000001", "20260103T000000Z-000003"]
    with pytest.raises(ValueError):
        retention.prune(tmp_path, JOB_NAME, 0)


def test_keep_and_lock_wait_are_validated(tmp_path):
    result = harness_run(tmp_path / "out", "--keep", "0")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    result = harness_run(tmp_path / "out", "--lock-wait", "-1")
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_ctrl_c_while_waiting_for_the_lock_exits_130_without_a_traceback(tmp_path):
    out = tmp_path / "out"
    holder = start_holder(out)
    try:
        arrival = subprocess.Popen(
            [sys.executable, "-m", "harness", "run", str(JOB), "--out", str(out), "--lock-wait", "60"],
            cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        assert "waiting up to 60 s" in arrival.stderr.readline()
        arrival.send_signal(signal.SIGINT)
        _, rest = arrival.communicate(timeout=30)
        assert arrival.returncode == 130, rest
        assert "interrupted while waiting for the run lock; nothing ran" in rest and "Traceback" not in rest
        assert the_runs(out) == []
    finally:
        holder.kill()
        holder.wait()
