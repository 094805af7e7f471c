"""One case outcome of one run as a flat, storable row: what the history keeps and reports read.

The scheduler's results (:class:`~harness.core.outcomes.CaseResult` inside suites) are rich and
nested; history, flakiness attribution and the HTML report need one row per case with the
context that lets a person tell a card from the code (host, board, device, image, ref).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from harness.core.outcomes import CaseResult, Outcome


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


def case_name(result: CaseResult) -> str:
    """A case's stable name in the history: ``Suite.Test`` for gtest, ``module.test`` for pytest,
    the check's name for the harness's own stand-in case (classname ``harness...``)."""
    if result.classname and not (result.classname == "harness" or result.classname.startswith("harness.")):
        return f"{result.classname}.{result.name}"
    return result.name


def case_records(
    run_id: str,
    job: str,
    host: str,
    results: Iterable[CaseResult],
    *,
    board: str = "",
    device: str = "",
    image_digest: str = "",
    ref: str = "",
    log: str = "",
    mask: Callable[[str], str] = lambda text: text,
) -> tuple[CaseRecord, ...]:
    """The rows of one check's results on one host; ``mask`` hides secrets in the free text."""
    return tuple(
        CaseRecord(
            run_id=run_id,
            job=job,
            check=result.check or result.name,
            case=case_name(result),
            host=host,
            outcome=result.outcome,
            category=str(result.verdict.category) if result.verdict.category is not None else None,
            board=board,
            device=device,
            image_digest=image_digest,
            ref=ref,
            duration=float(result.duration or sum(a.duration for a in result.attempts)),
            attempt=max(1, len(result.attempts)),
            message=mask(result.verdict.message),
            evidence=tuple(
                mask(f"{ev.line if ev.line is not None else '-'}: {ev.text}" + (f" [{ev.signature}]" if ev.signature else ""))
                for ev in result.verdict.evidence
            ),
            log=log,
        )
        for result in results
    )
