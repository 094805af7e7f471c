"""One case outcome of one run as a flat, storable row: what the history keeps and reports read.

The scheduler's results (:class:`~harness.core.outcomes.CaseResult` inside suites) are rich and
nested; history, flakiness attribution and the HTML report need one row per case with the
context that lets a person tell a card from the code (host, board, device, image, ref).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.core.outcomes import Outcome


@dataclass(frozen=True)
class RunInfo:
    """One run of a suite (a job spec run by ``harness run``)."""

    run_id: str
    suite: str  # the job's name
    started: str  # ISO 8601, UTC
    finished: str = ""
    exit_code: int | None = None
    image_digest: str = ""  # the image the checks ran in ("" when unknown)
    ref: str = ""  # the tt-metal (or tt-mlir) ref the image was built from ("" when unknown)


@dataclass(frozen=True)
class CaseRecord:
    """One case's combined verdict in one run on one host."""

    run_id: str
    job: str
    check: str
    case: str  # the test case's name (gtest Suite.Test, pytest node id, or the check's name)
    host: str
    outcome: Outcome
    category: str | None = None  # env fault category or error kind
    board: str = ""  # e.g. n150, n300
    device: str = ""  # the /dev/tenstorrent/N indices it ran on, comma-separated
    image_digest: str = ""
    ref: str = ""
    duration: float = 0.0  # seconds, over all attempts
    attempt: int = 1  # how many attempts it took (retries and repeats)
    message: str = ""
    evidence: tuple[str, ...] = ()  # deciding lines, "line: text [signature]"
    log: str = ""  # path of its log, relative to the run's output directory
