"""How a check's run is judged from its logs, once Docker's and the probe's ending
(:mod:`harness.core.container_exit`) said nothing. Pure: every executor (docker over SSH or
locally today, a cluster scheduler's node later) hands in the exit status and log lines and
gets the same verdict.

- A command's exit status says pass or fail; its log can only say the environment broke:
  exit 0 is a pass unless the log carries a fatal environment signature; a non-zero exit is
  what the log shows (a real failure or an environment fault), else a plain failure.
- A timeout is ``env_fault/timeout``, unless the log shows an environment fault, which says
  more: a device hang, or a wait (a card lock another process holds) that never ended.
- A gtest/pytest run that wrote no report: what its log shows; a log showing nothing wrong is
  the harness's problem (``error/artifact``), never a pass.
"""

from __future__ import annotations

from typing import Iterable

from harness.core.classifier import classify_log
from harness.core.outcomes import HarnessErrorKind, Outcome, Verdict


def judge_log(lines: Iterable[str], exit_status: int | None) -> Verdict:
    logged = classify_log(lines, exit_code=exit_status)
    if logged.outcome is Outcome.ENV_FAULT:
        return logged
    if exit_status == 0:
        return Verdict(Outcome.PASS)
    if logged.outcome is Outcome.FAIL and logged.evidence:
        return Verdict(Outcome.FAIL, message=f"exited {exit_status}: {logged.message}", evidence=logged.evidence)
    return Verdict(Outcome.FAIL, message=f"exited {exit_status}; the log names no failure or environment signature")


def after_timeout(timed_out: Verdict, lines: Iterable[str]) -> Verdict:
    """A timed-out check: an environment fault its log shows (a device hang, a lock wait that
    never ended) beats "it took too long"."""
    logged = classify_log(lines)
    return logged if logged.outcome is Outcome.ENV_FAULT else timed_out


def without_report(kind: str, report: str, lines: Iterable[str], exit_status: int | None) -> Verdict:
    """A gtest/pytest run whose XML report is missing or unreadable."""
    verdict = judge_log(lines, exit_status)
    if verdict.outcome is Outcome.PASS:
        return Verdict.error(
            HarnessErrorKind.ARTIFACT, f"{kind} exited {exit_status} but wrote no {report}; its log shows no failure"
        )
    return verdict
