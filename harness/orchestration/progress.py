"""The console listener of a run: what ``harness run`` shows while checks run.

Two faces, chosen by whether the stream is a terminal:

- not a TTY (scheduled runs, CI logs, pipes): one plain line per event, each starting with an
  ISO-8601 UTC timestamp and the host and check it is about, so a log can be grepped and read
  after the fact;
- a TTY: a live host x check table redrawn in place with plain ANSI escape codes (no new
  dependency), ticking once a second from a daemon thread while anything runs, and left on
  screen when the run ends.

Events arrive from several worker threads at once, so everything happens under one lock and
each plain line is one ``write``. A console is never a reason to stop a run: odd input and a
broken stream are swallowed (see ``Listener`` in harness/core/events.py).
"""

from __future__ import annotations

import datetime
import shutil
import sys
import threading
import time
from typing import Callable, TextIO

from harness.core.events import (
    CheckFinished, CheckStarted, CheckWaiting, HostChecked, HostQuarantined, RunFinished, RunStarted,
)
from harness.core.matrix import cell

_UP = "\r\x1b[{}A"  # back to the first line of the previous frame
_EOL = "\x1b[K"  # erase what a longer previous frame left on this line
_EOS = "\x1b[J"  # erase the rows a taller previous frame left below
_MIN_CELL = 4


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _devices(devices: tuple[int, ...]) -> str:
    return ",".join(str(d) for d in devices)


class ConsoleProgress:
    """A ``harness.core.events.Listener`` that shows a run's progress on ``stream``.

    ``tty=None`` asks ``stream.isatty()``; ``clock`` (seconds, monotonic) times the run and the
    running checks, ``now`` (an aware datetime) stamps the plain lines: both injectable for tests.
    """

    def __init__(self, stream: TextIO | None = None, tty: bool | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 now: Callable[[], datetime.datetime] | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if tty is None:
            try:
                tty = bool(self.stream.isatty())
            except (AttributeError, OSError, ValueError):
                tty = False
        self.tty = tty
        self.clock = clock
        self.now = now or _utc_now
        self._lock = threading.Lock()
        self._run_id, self._job, self._exit = "", "", None
        self._started: float | None = None
        self._hosts: list[str] = []
        self._checks: list[str] = []
        self._preflight: dict[str, str] = {}
        # (host, check) -> (state, detail, since): state queued|waiting|running|done
        self._cells: dict[tuple[str, str], tuple[str, str, float]] = {}
        self._drawn = 0  # lines of the last frame, to move back over them
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def say(self, line: str) -> None:
        """A line that is not an event (image build output): above the table on a TTY, so
        the table stays whole; a timestamped line otherwise."""
        try:
            with self._lock:
                if self.tty:
                    back = _UP.format(self._drawn) if self._drawn else ""
                    self._drawn = 0
                    self._write(back + line.rstrip("\n") + _EOL + "\n" + _EOS)
                    if self._hosts:
                        self._draw()
                else:
                    self._write(f"{self.now().strftime('%Y-%m-%dT%H:%M:%SZ')} {line.rstrip()}\n")
        except Exception:  # noqa: BLE001 - the console must never stop a run
            pass

    # -- the listener ---------------------------------------------------------------------------

    def on_event(self, event: object) -> None:
        try:
            with self._lock:
                line = self._apply(event)
                if line is None:  # an event this console does not know: nothing to show
                    return
                if self.tty:
                    self._draw()
                    self._start_ticker()
                else:
                    self._write(f"{self.now().strftime('%Y-%m-%dT%H:%M:%SZ')} {line}\n")
        except Exception:  # noqa: BLE001 - the console must never stop a run
            pass
        finally:
            if isinstance(event, RunFinished):
                self._stop_ticker()

    def _apply(self, event: object) -> str | None:
        """Record ``event`` in the table's state; return its plain line (None: ignored)."""
        t = self.clock()
        if self._started is None:
            self._started = t
        if isinstance(event, RunStarted):
            self._run_id, self._job, self._started = event.run_id, event.job, t
            for host in event.hosts:
                self._known(host, None)
            for check in event.checks:
                self._known(None, check)
            return (f"run {event.run_id} started: {event.job}, "
                    f"{len(event.checks)} checks on {len(event.hosts)} hosts ({', '.join(event.hosts)})")
        if isinstance(event, RunFinished):
            self._run_id, self._exit = event.run_id or self._run_id, event.exit_code
            self._stop.set()  # no more ticks; the final frame stays on screen
            how = "cancelled" if event.cancelled else "finished"
            return f"run {self._run_id} {how}: exit {event.exit_code} ({t - self._started:.1f} s)"
        if isinstance(event, HostChecked):
            self._known(event.host, None)
            self._preflight[event.host] = "fault: " + ", ".join(event.faults) if event.faults else "ok"
            return f"{event.host} preflight: {self._preflight[event.host]}"
        if isinstance(event, HostQuarantined):
            self._known(event.host, None)
            self._preflight[event.host] = "quarantined"
            return f"{event.host} host quarantined: {event.reason}"
        if isinstance(event, CheckStarted):
            self._known(event.host, event.check)
            self._cells[event.host, event.check] = ("running", _devices(event.devices), t)
            devices = f"devices {_devices(event.devices)}" if event.devices else "no devices"
            return f"{event.host} {event.check} started ({devices})"
        if isinstance(event, CheckWaiting):
            self._known(event.host, event.check)
            self._cells[event.host, event.check] = ("waiting", event.detail, t)
            return f"{event.host} {event.check} waiting: {event.detail}"
        if isinstance(event, CheckFinished):
            self._known(event.host, event.check)
            text = cell(event.cases)
            self._cells[event.host, event.check] = ("done", text, t)
            n = len(event.cases)
            seconds = sum(case.duration for case in event.cases)
            line = f"{event.host} {event.check} finished: {text} ({n} case{'' if n == 1 else 's'}, {seconds:.1f} s)"
            return line + (f"; {event.note}" if event.note else "")
        return None

    def _known(self, host: str | None, check: str | None) -> None:
        # Hosts and checks the RunStarted did not name (or no RunStarted at all) still get a place.
        if host is not None and host not in self._hosts:
            self._hosts.append(host)
        if check is not None and check not in self._checks:
            self._checks.append(check)

    # -- the live table -------------------------------------------------------------------------

    def frame(self) -> list[str]:
        """The table as it stands, fitted to the terminal's width (cells cut, never wrapped)."""
        t = self.clock()
        elapsed = int(t - self._started) if self._started is not None else 0
        ending = f"exit {self._exit}" if self._exit is not None else "running"
        top = " ".join(p for p in ("run", self._run_id, self._job, ending, f"elapsed {elapsed}s") if p)
        rows = [["host", "preflight", *self._checks]]
        for host in self._hosts:
            rows.append([host, self._preflight.get(host, "-"),
                         *(self._cell(host, check, t) for check in self._checks)])
        width = max(shutil.get_terminal_size().columns - 1, 10)  # the last column would autowrap
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        # Shrink the widest column first, so short cells (pass, FAIL) stay whole the longest;
        # the host names the row, so it is never cut (the line itself is, if nothing else fits).
        while sum(widths) + 2 * (len(widths) - 1) > width and max(widths[1:]) > _MIN_CELL:
            widest = max(range(1, len(widths)), key=lambda i: widths[i])
            widths[widest] -= 1
        lines = [top] + ["  ".join(_fit(v, w).ljust(w) for v, w in zip(row, widths)) for row in rows]
        return [_fit(line.rstrip(), width) for line in lines]

    def _cell(self, host: str, check: str, t: float) -> str:
        state, detail, since = self._cells.get((host, check), ("queued", "", t))
        if state == "running":
            return f"running {int(t - since)}s" + (f" dev {detail}" if detail else "")
        return detail if state == "done" else state

    def _draw(self) -> None:
        lines = self.frame()
        back = _UP.format(self._drawn) if self._drawn else ""
        self._write(back + "".join(line + _EOL + "\n" for line in lines) + _EOS)
        self._drawn = len(lines)

    def _start_ticker(self) -> None:
        if self._ticker is None and not self._stop.is_set():
            self._ticker = threading.Thread(target=self._tick, name="console-progress", daemon=True)
            self._ticker.start()

    def _tick(self) -> None:
        # Elapsed times move without events: redraw once a second while a check runs.
        while not self._stop.wait(1.0):
            try:
                with self._lock:
                    if not self._stop.is_set() and any(s == "running" for s, _, _ in self._cells.values()):
                        self._draw()
            except Exception:  # noqa: BLE001 - a console that cannot draw keeps quiet
                pass

    def _stop_ticker(self) -> None:
        self._stop.set()
        ticker = self._ticker
        if ticker is not None and ticker is not threading.current_thread():
            ticker.join(timeout=2.0)  # outside the lock: the ticker may be waiting for it

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: the run goes on without a console
            pass


def _fit(text: str, width: int) -> str:
    """``text`` cut to ``width``; a cut shows as a trailing ``~``."""
    if len(text) <= width:
        return text
    return text[: width - 1] + "~" if width > 1 else text[:width]
