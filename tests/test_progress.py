"""The console listener of `harness run`: plain lines for logs, a live table for a terminal."""

from __future__ import annotations

import datetime
import io
import os
import pty
import re
import select
import threading

from harness.core.events import (
    CheckFinished, CheckStarted, CheckWaiting, HostChecked, HostQuarantined, RunFinished, RunStarted,
)
from harness.core.outcomes import CaseResult, EnvCategory, KnownBug, Outcome, Verdict
from harness.orchestration.progress import ConsoleProgress

HOSTS = ("sim-wh-01", "sim-wh-02", "sim-wh-03")
CHECKS = ("device-smoke", "layernorm-bw-bugrepro", "eraseinverseops-order")
T0 = datetime.datetime(2026, 11, 23, 15, 40, 0, tzinfo=datetime.timezone.utc)
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class Clock:
    """A hand-moved clock: ``clock()`` for elapsed times, ``now()`` for the timestamps."""

    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t

    def now(self) -> datetime.datetime:
        return T0 + datetime.timedelta(seconds=self.t - 100.0)


def case(name: str, verdict: Verdict, duration: float = 1.0, bug: KnownBug | None = None) -> CaseResult:
    return CaseResult(name=name, classname="LayerNormBackwardOpTest", verdict=verdict, duration=duration, known_bug=bug)


PASS = Verdict(Outcome.PASS)
XFAIL = Verdict(Outcome.XFAIL, message="known bug: accumulator overwritten")
FAIL = Verdict(Outcome.FAIL, message="ops out of order")
HUGEPAGES = Verdict.env_fault(EnvCategory.HUGEPAGES, "no 1G hugepages")


def progress(tty: bool, clock: Clock) -> tuple[ConsoleProgress, io.StringIO]:
    stream = io.StringIO()
    return ConsoleProgress(stream=stream, tty=tty, clock=clock, now=clock.now), stream


def a_run(console: ConsoleProgress, clock: Clock) -> None:
    """One run of three checks on three hosts, the third host without hugepages."""
    console.on_event(RunStarted("r1", "nightly", CHECKS, HOSTS))
    clock.t += 2
    console.on_event(HostChecked("sim-wh-01", ()))
    console.on_event(HostChecked("sim-wh-03", ("hugepages", "firmware")))
    console.on_event(CheckStarted("sim-wh-01", "layernorm-bw-bugrepro", (0,)))
    console.on_event(CheckWaiting("sim-wh-02", "device-smoke", "device 0 leased by run r0 (pid 4242)"))
    clock.t += 12.5
    bugs = tuple(case(f"BugRepro_{i}", XFAIL, 1.75, KnownBug("accumulator")) for i in range(7))
    console.on_event(CheckFinished("sim-wh-01", "layernorm-bw-bugrepro", bugs))
    console.on_event(CheckFinished("sim-wh-01", "eraseinverseops-order", (case("order", FAIL, 0.4),), note="A/B rerun: pass without the pass"))
    console.on_event(CheckFinished("sim-wh-03", "device-smoke", (case("smoke", HUGEPAGES, 0.0),)))
    console.on_event(HostQuarantined("sim-wh-02", "device-hang twice"))
    clock.t += 1
    console.on_event(RunFinished("r1", 1))


def test_plain_lines_are_stamped_and_tagged_with_host_and_check():
    clock = Clock()
    console, stream = progress(False, clock)
    a_run(console, clock)
    assert stream.getvalue().splitlines() == [
        "2026-11-23T15:40:00Z run r1 started: nightly, 3 checks on 3 hosts (sim-wh-01, sim-wh-02, sim-wh-03)",
        "2026-11-23T15:40:02Z sim-wh-01 preflight: ok",
        "2026-11-23T15:40:02Z sim-wh-03 preflight: fault: hugepages, firmware",
        "2026-11-23T15:40:02Z sim-wh-01 layernorm-bw-bugrepro started (devices 0)",
        "2026-11-23T15:40:02Z sim-wh-02 device-smoke waiting: device 0 leased by run r0 (pid 4242)",
        "2026-11-23T15:40:14Z sim-wh-01 layernorm-bw-bugrepro finished: known bug (7 cases, 12.2 s)",
        "2026-11-23T15:40:14Z sim-wh-01 eraseinverseops-order finished: FAIL (1 case, 0.4 s); A/B rerun: pass without the pass",
        "2026-11-23T15:40:14Z sim-wh-03 device-smoke finished: env_fault/hugepages (1 case, 0.0 s)",
        "2026-11-23T15:40:14Z sim-wh-02 host quarantined: device-hang twice",
        "2026-11-23T15:40:15Z run r1 finished: exit 1 (15.5 s)",
    ]
    assert "\x1b" not in stream.getvalue()


def test_cancelled_run_no_devices_and_odd_input():
    clock = Clock()
    console, stream = progress(False, clock)
    console.on_event(CheckStarted("h", "compile", ()))  # no RunStarted first: still shown
    console.on_event("not an event")
    console.on_event(None)
    console.on_event(CheckFinished("h", "compile", ("not a case",)))  # cell() cannot read it: swallowed
    console.on_event(RunFinished("r2", 130, cancelled=True))
    assert stream.getvalue().splitlines() == [
        "2026-11-23T15:40:00Z h compile started (no devices)",
        "2026-11-23T15:40:00Z run r2 cancelled: exit 130 (0.0 s)",
    ]


def test_a_broken_stream_never_stops_the_run():
    stream = io.StringIO()
    stream.close()
    console = ConsoleProgress(stream=stream, tty=False)
    console.on_event(RunStarted("r", "j", ("c",), ("h",)))
    console.on_event(RunFinished("r", 0))


def test_events_from_eight_threads_give_whole_lines():
    clock = Clock()
    console, stream = progress(False, clock)
    barrier = threading.Barrier(8)

    def worker(n: int) -> None:
        barrier.wait()
        for i in range(200):
            check = f"check-{n}-{i}"
            console.on_event(CheckStarted(f"host-{n}", check, (n,)))
            console.on_event(CheckFinished(f"host-{n}", check, (case("t", PASS, 0.5),)))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    lines = stream.getvalue().split("\n")
    assert lines.pop() == ""  # every line ended with its newline
    assert len(lines) == 8 * 200 * 2
    shape = re.compile(r"2026-11-23T15:40:00Z host-(\d) check-\1-\d+ "
                       r"(started \(devices \1\)|finished: pass \(1 case, 0\.5 s\))")
    assert all(shape.fullmatch(line) for line in lines), [l for l in lines if not shape.fullmatch(l)][:3]


def frames(output: str) -> list[list[str]]:
    """The frames the table drew: split where the cursor moved back up, escapes removed."""
    return [ANSI.sub("", chunk).replace("\r", "").splitlines() for chunk in re.split(r"\r\x1b\[\d+A", output)]


def test_tty_table_redraws_in_place_and_ends_on_the_final_cells(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    clock = Clock()
    console, stream = progress(True, clock)
    console.on_event(RunStarted("r1", "nightly", CHECKS, HOSTS))
    clock.t += 3
    console.on_event(CheckStarted("sim-wh-02", "device-smoke", (0,)))
    clock.t += 4
    console.on_event(CheckWaiting("sim-wh-02", "layernorm-bw-bugrepro", "device 0 leased"))
    middle = frames(stream.getvalue())[-1]
    assert middle[0] == "run r1 nightly running elapsed 7s"
    assert "running 4s dev 0" in middle[3] and "waiting" in middle[3] and "queued" in middle[3]
    a_run(console, clock)
    output = stream.getvalue()
    assert output.count("\x1b[") > 10 and "\r\x1b[5A" in output  # moved back over a 5-line frame
    final = frames(output)[-1]
    assert final[0] == "run r1 nightly exit 1 elapsed 15s"
    header, *rows = (line.split() for line in final[1:])
    assert header == ["host", "preflight", *CHECKS]
    assert [row[0] for row in rows] == list(HOSTS)
    table = "\n".join(final)
    assert re.search(r"sim-wh-01 +ok +queued +known bug +FAIL\n", table), table
    assert re.search(r"sim-wh-02 +quarantined +waiting +waiting +queued\n", table), table
    assert re.search(r"sim-wh-03 +fault: hugepages, firmware +env_fault/hugepages +queued +queued$", table), table


def test_tty_table_cuts_cells_to_a_narrow_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "48")
    clock = Clock()
    console, stream = progress(True, clock)
    a_run(console, clock)
    final = frames(stream.getvalue())[-1]
    assert len(final) == 5 and all(len(line) <= 47 for line in final), final
    assert [line.split()[0] for line in final[2:]] == list(HOSTS) and "~" in final[1]
    # The short cells stay whole while the long ones give way.
    assert " ok " in final[2] and "FAIL" in final[2]


def test_a_pseudo_terminal_gets_the_table(monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    master, slave = pty.openpty()
    stream = os.fdopen(slave, "w")
    try:
        clock = Clock()
        console = ConsoleProgress(stream=stream, clock=clock, now=clock.now)  # tty=None: ask the stream
        assert console.tty
        a_run(console, clock)
        output = b""
        while select.select([master], [], [], 0.2)[0]:
            output += os.read(master, 65536)
    finally:
        stream.close()
        os.close(master)
    text = output.decode()
    assert "\x1b[" in text and "2026-11-23T" not in text
    final = frames(text)[-1]
    assert final[0] == "run r1 nightly exit 1 elapsed 15s"
    assert any(line.startswith("sim-wh-03") and "env_fault/hugepages" in line for line in final)


def test_the_ticker_redraws_while_a_check_runs_and_stops_with_the_run(monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    clock = Clock()
    console, stream = progress(True, clock)
    console.on_event(RunStarted("r1", "nightly", ("c",), ("h",)))
    console.on_event(CheckStarted("h", "c", (0,)))
    ticker = console._ticker
    assert ticker is not None and ticker.daemon
    clock.t += 5
    for _ in range(30):  # the ticker draws on its own within about a second
        if "running 5s" in stream.getvalue():
            break
        threading.Event().wait(0.1)
    assert "running 5s dev 0" in stream.getvalue()
    console.on_event(RunFinished("r1", 0))
    assert not ticker.is_alive()


def test_lines_that_are_not_events_go_above_the_table_or_get_a_stamp(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    clock = Clock()
    console, stream = progress(True, clock)
    console.on_event(RunStarted("r1", "nightly", CHECKS, HOSTS))
    console.say("Step 3/9 : RUN apt-get install g++")
    last = frames(stream.getvalue())[-1]
    assert last[0] == "Step 3/9 : RUN apt-get install g++" and last[1].startswith("run r1 nightly")
    plain, out = progress(False, clock)
    plain.say("Loaded image ID: sha256:abc")
    assert out.getvalue() == "2026-11-23T15:40:00Z Loaded image ID: sha256:abc\n"
