"""What happens during a run, as events: the scheduler emits them, listeners consume them.

The JUnit feed, ``summary.json``, the console and the history database are listeners;
none of them decides an outcome. Events are small immutable values; a listener that raises is
the harness's own bug and is reported, never allowed to stop the run.
"""

from __future__ import annotations

from dataclasses import dataclass
import traceback
from typing import Callable, Iterable, Protocol

from harness.core.outcomes import CaseResult


@dataclass(frozen=True)
class RunStarted:
    run_id: str
    job: str
    checks: tuple[str, ...]
    hosts: tuple[str, ...]


@dataclass(frozen=True)
class HostChecked:
    """Preflight of a host ended: ``faults`` empty when it is fit."""

    host: str
    faults: tuple[str, ...]


@dataclass(frozen=True)
class CheckStarted:
    host: str
    check: str
    devices: tuple[int, ...]


@dataclass(frozen=True)
class ImageReady:
    """The job's image is on a host: what its checks there run in (the history keeps it)."""

    host: str
    tag: str
    digest: str


@dataclass(frozen=True)
class CheckWaiting:
    """A check waits for a device another run has leased."""

    host: str
    check: str
    detail: str


@dataclass(frozen=True)
class CheckFinished:
    host: str
    check: str
    cases: tuple[CaseResult, ...]
    note: str = ""  # a retry, a triage: what the scheduler did on top of running it
    # The cases of an attempt that is retried on another host: not in this run's report (the
    # retry's are), but an outcome on this host all the same (the history keeps it).
    retried: tuple[CaseResult, ...] = ()


@dataclass(frozen=True)
class HostQuarantined:
    host: str
    reason: str


@dataclass(frozen=True)
class RunFinished:
    run_id: str
    exit_code: int
    cancelled: bool = False
    finished: str = ""  # ISO 8601, UTC


Event = RunStarted | HostChecked | ImageReady | CheckStarted | CheckWaiting | CheckFinished | HostQuarantined | RunFinished


class Listener(Protocol):
    def on_event(self, event: Event) -> None: ...


def deliver(listeners: Iterable[Listener], event: Event, say: Callable[[str], None]) -> None:
    """Hand ``event`` to every listener; one that raises is the harness's own bug: it is said,
    with its traceback, and the run and the other listeners go on."""
    for listener in listeners:
        try:
            listener.on_event(event)
        except Exception:
            say(f"harness: listener {type(listener).__name__} failed on {type(event).__name__}:\n{traceback.format_exc()}")
