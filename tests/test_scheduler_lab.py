"""A lab, not a host: concurrency, leases, retries, quarantine, hang triage and cancellation,
on the simulated lab, asserted from the hosts' side wherever the harness could fool itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.lab.sim import SimLab, host_name
from tests.jobspec import write_lab_job
from tests.labfixtures import E2E_LAB, cases

pytestmark = [pytest.mark.docker, pytest.mark.ssh]

REPO = Path(__file__).resolve().parents[1]
H1, H2 = host_name(E2E_LAB, 1), host_name(E2E_LAB, 2)
LOCK = "/tmp/tt-harness-leases/device-0.lock"
CARD = "/sys/class/tenstorrent/tenstorrent!0"


def start(lab: SimLab, job: Path, out: Path, *args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "harness", "run", str(job), "--inventory", str(lab.inventory_path), "--out", str(out), *args],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})},
    )


def finish(run: subprocess.Popen, out: Path, timeout: float = 600) -> dict:
    stdout, stderr = run.communicate(timeout=timeout)
    summary = json.loads((out / "summary.json").read_text())
    summary["_rc"], summary["_out"] = run.returncode, stdout + stderr
    return summary


def on_host(lab: SimLab, host: str, script: str, user: str = "ci") -> tuple[int, str]:
    done = lab._container(host).exec_run(["su", user, "-c", script] if user != "root" else ["sh", "-c", script])
    return done.exit_code, done.output.decode(errors="replace")


def harness_containers(lab: SimLab, host: str) -> list[str]:
    _, out = on_host(lab, host, "docker ps -a --filter label=harness.run --format '{{.Names}} {{.Label \"harness.devices\"}}'")
    return [line for line in out.splitlines() if line.strip()]


def lease_free(lab: SimLab, host: str) -> bool:
    return on_host(lab, host, f"flock -n {LOCK} true")[0] == 0


def wait_for(predicate, timeout: float = 60, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


# The smoke check hang triage runs; a hang becomes tt-metal's TIMEOUT error after 3 s.
SMOKE = """\
        - name: device-smoke
          kind: gtest
          binary: build/test/tt_metal/sim_device_smoke
          timeout: 1m
          env: {TT_METAL_OPERATION_TIMEOUT_SECONDS: "3"}
"""  # indented as the checks written inside the tests below

SLEEPERS = """\
    - {name: a, kind: command, command: [sleep, "2"], timeout: 2m}
    - {name: b, kind: command, command: [sleep, "2"], timeout: 2m}
    - {name: c, kind: command, command: [sleep, "2"], timeout: 2m}
"""


def test_two_concurrent_runs_never_share_a_card(sim_lab: SimLab, tmp_path: Path):
    job = write_lab_job(tmp_path, name="sched", checks=SLEEPERS)
    seen: list[list[str]] = []
    stop = threading.Event()

    def watch() -> None:  # from the host's side: the containers its engine runs, by card
        while not stop.is_set():
            seen.append([c for c in harness_containers(sim_lab, H1) if c.endswith(" 0")])
            time.sleep(0.1)

    watcher = threading.Thread(target=watch)
    watcher.start()
    started = time.monotonic()
    runs = [start(sim_lab, job, tmp_path / f"out{i}", "--hosts", H1, "--quiet") for i in (1, 2)]
    try:
        summaries = [finish(run, tmp_path / f"out{i}") for i, run in zip((1, 2), runs)]
    finally:
        stop.set()
        watcher.join()
    elapsed = time.monotonic() - started
    for summary in summaries:
        assert summary["_rc"] == 0, summary["_out"]
    assert max(len(s) for s in seen) == 1, [s for s in seen if len(s) > 1][:3]  # one container on card 0 at a time
    assert any(seen), "the watcher never saw a check run"
    assert elapsed >= 6 * 2  # six two-second checks, one card: they took turns


def test_kill_9_leaves_no_lease_and_cleanup_leaves_no_container(sim_lab: SimLab, tmp_path: Path):
    job = write_lab_job(tmp_path, name="sched", checks="""\
        - {name: long, kind: command, command: [sleep, "300"], timeout: 10m, env: {API_TOKEN: "${E2E_TOKEN}"}}
        """)
    run = start(sim_lab, job, tmp_path / "out", "--hosts", H1, "--quiet", env={"E2E_TOKEN": "s3cret-value"})
    try:
        wait_for(lambda: harness_containers(sim_lab, H1), what="the check's container")
        assert not lease_free(sim_lab, H1)  # held while the check runs
        run.kill()  # SIGKILL: no handler, no cleanup of its own
        run.wait(timeout=30)
    finally:
        if run.poll() is None:
            run.kill()
    wait_for(lambda: lease_free(sim_lab, H1), timeout=30, what="the lease to be released")
    wait_for(lambda: not harness_containers(sim_lab, H1), timeout=60, what="the host to remove the container")
    cleaned = subprocess.run(
        [sys.executable, "-m", "harness", "cleanup", "--inventory", str(sim_lab.inventory_path), "--hosts", H1],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
    _, folders = on_host(sim_lab, H1, "ls -d /tmp/harness-* 2>/dev/null; grep -rl s3cret-value /tmp 2>/dev/null", user="root")
    assert folders.strip() == ""  # no work folder, no secret left on the host
    assert harness_containers(sim_lab, H1) == []


def test_a_busy_card_waits_then_the_pool_moves_on_and_quarantines_the_host(sim_lab: SimLab, tmp_path: Path):
    job = write_lab_job(tmp_path, name="sched", checks=SLEEPERS, fanout="any")
    # Someone else's run holds H1's card (the same lock any harness takes).
    holder = subprocess.Popen(
        ["docker", "exec", sim_lab.container_name(H1), "su", "ci", "-c",
         f"mkdir -p /tmp/tt-harness-leases && chmod 1777 /tmp/tt-harness-leases 2>/dev/null; exec flock -o {LOCK} sleep 121 </dev/null >/dev/null 2>&1"],
    )
    try:
        wait_for(lambda: not lease_free(sim_lab, H1), what="the other holder")
        out = tmp_path / "out"
        summary = finish(start(sim_lab, job, out, "--hosts", f"{H1},{H2}", "--lease-wait", "2", "--quarantine-after", "2"), out)
    finally:
        # The holder runs in the host, not in the docker exec client: stop it there.
        on_host(sim_lab, H1, f"pkill -f 'flock -o {LOCK}'; pkill -f 'sleep 121'", user="root")
        holder.wait()
    wait_for(lambda: lease_free(sim_lab, H1), what="the other holder to let go")
    assert summary["_rc"] == 0, summary["_out"]
    assert "waiting" in summary["_out"]  # the console said it waited
    assert {c["check"] for c in cases(summary, H2)} == {"a", "b", "c"}
    assert {c["outcome"] for c in cases(summary, H2)} == {"pass"}
    assert cases(summary, H1) == []
    h1 = next(s for s in summary["hosts"] if s["host"] == H1)
    assert h1["quarantined"] and "device-busy" in h1["quarantined"]
    assert any("retried on another host" in note for note in h1["notes"])


def test_a_check_that_hangs_a_healthy_board_is_a_real_failure(sim_lab: SimLab, tmp_path: Path):
    job = write_lab_job(tmp_path, name="sched", checks=SMOKE + f"""\
        - name: hangs-it
          kind: command
          command: [sh, -c, 'echo hung > "{CARD}/tt_sim_state"; exec sleep 600']
          timeout: 5s
        """, smoke="device-smoke")
    out = tmp_path / "out"
    summary = finish(start(sim_lab, job, out, "--hosts", H1, "--quiet"), out)
    (case,) = cases(summary, H1, "hangs-it")
    assert case["outcome"] == "fail" and "hangs the device" in case["message"], case
    assert [c["outcome"] for c in cases(summary, H1, "device-smoke")] == ["pass"], cases(summary, H1)
    assert summary["_rc"] == 1
    assert on_host(sim_lab, H1, f"cat '{CARD}/tt_sim_state'")[1].strip() == "hung"  # as the check left it
    on_host(sim_lab, H1, "tt-smi -r 0")


def test_the_hang_fault_is_the_boards_not_the_checks(sim_lab: SimLab, tmp_path: Path):
    job = write_lab_job(tmp_path, name="sched", checks=SMOKE + """\
        - name: small
          kind: gtest
          binary: build/tt-train/tests/ttml_tests
          filter: LayerNormBackwardOpTest.MetalLayerNormBw_OneTile
          timeout: 1m
        """, smoke="device-smoke")
    sim_lab.fault(H1, "hang")
    try:
        out = tmp_path / "out"
        summary = finish(start(sim_lab, job, out, "--hosts", H1, "--quiet"), out)
    finally:
        sim_lab.heal(H1)
    (smoke,) = cases(summary, H1, "device-smoke")
    assert (smoke["outcome"], smoke["category"]) == ("env_fault", "device-hang"), smoke
    assert "after a reset the check ran (pass)" in smoke["message"]
    assert [c["outcome"] for c in cases(summary, H1, "small")] == ["pass"]  # the reset cured the board
    assert summary["_rc"] == 3  # no real failure


def test_a_board_that_stays_broken_after_a_reset_is_quarantined(sim_lab: SimLab, tmp_path: Path):
    # The check wedges the board so that a reset cannot bring it back (its node is gone).
    job = write_lab_job(tmp_path, name="sched", checks=SMOKE + f"""\
        - name: wedges-it
          kind: command
          command: [sh, -c, 'echo hung > "{CARD}/tt_sim_state"; rm -f /dev/tenstorrent/0; exec sleep 600']
          timeout: 5s
        - name: after
          kind: gtest
          binary: build/tt-train/tests/ttml_tests
          filter: LayerNormBackwardOpTest.MetalLayerNormBw_OneTile
          timeout: 1m
        """, smoke="device-smoke")
    try:
        out = tmp_path / "out"
        summary = finish(start(sim_lab, job, out, "--hosts", H1, "--quiet"), out)
    finally:
        sim_lab.heal(H1)
    (wedged,) = cases(summary, H1, "wedges-it")
    assert (wedged["outcome"], wedged["category"]) == ("env_fault", "device-hang"), wedged
    assert "is sick" in wedged["message"]
    host = next(s for s in summary["hosts"] if s["host"] == H1)
    assert host["quarantined"]
    assert [(c["outcome"], c["category"]) for c in cases(summary, H1, "after")] == [("env_fault", "device-hang")]
    assert summary["_rc"] == 3


@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_every_container_and_writes_the_partial_report(sim_lab: SimLab, tmp_path: Path, sig, status):
    job = write_lab_job(tmp_path, name="sched", checks="""\
        - {name: quick, kind: command, command: ["true"], timeout: 1m}
        - {name: long, kind: command, command: [sleep, "300"], timeout: 10m, env: {API_TOKEN: "${E2E_TOKEN}"}}
        - {name: never, kind: command, command: ["true"], timeout: 1m}
        """)
    out = tmp_path / "out"
    run = start(sim_lab, job, out, "--hosts", f"{H1},{H2}", "--quiet", env={"E2E_TOKEN": "s3cret-value"})
    try:
        wait_for(lambda: any("long" in c for c in harness_containers(sim_lab, H1) + harness_containers(sim_lab, H2)),
                 what="the long check")
        run.send_signal(sig)
        time.sleep(0.3)
        run.send_signal(sig)  # a second one changes nothing: the cleanup still runs
        summary = finish(run, out, timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert summary["_rc"] == status, summary["_out"]
    assert summary["cancelled"] is True
    for host in (H1, H2):
        assert harness_containers(sim_lab, host) == []
        assert lease_free(sim_lab, host)
        _, left = on_host(sim_lab, host, "ls -d /tmp/harness-* 2>/dev/null; grep -rl s3cret-value /tmp 2>/dev/null", user="root")
        assert left.strip() == ""
        outcomes = {c["check"]: c["outcome"] for c in cases(summary, host)}
        assert outcomes.get("long") == "skip" and outcomes.get("never") == "skip"
    junit = (out / "junit.xml").read_text()
    assert "quick" in junit and "cancelled" in junit
