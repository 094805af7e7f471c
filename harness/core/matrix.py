"""The host x check matrix a run ends with: one cell per check on each host, saying what
happened there in a word (pass, real failure, known bug, env fault with its category)."""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Sequence

from harness.core.outcomes import CaseResult, Outcome, SuiteResult

# The outcome a cell names when a check's cases differ: the one that most needs a person.
PRECEDENCE = (
    Outcome.ERROR, Outcome.FAIL, Outcome.XPASS, Outcome.ENV_FAULT,
    Outcome.FLAKY, Outcome.XFAIL, Outcome.PASS, Outcome.SKIP,
)
_WORDS = {Outcome.FAIL: "FAIL", Outcome.ERROR: "ERROR", Outcome.XPASS: "XPASS", Outcome.XFAIL: "known bug"}


def cell(cases: Sequence[CaseResult]) -> str:
    """One check on one host: ``pass``, ``FAIL 7/7``, ``known bug``, ``env_fault/hugepages``..."""
    return cell_word([(case.outcome, str(case.verdict.category) if case.verdict.category else None) for case in cases])


def worst_outcome(outcomes: Iterable[Outcome]) -> Outcome | None:
    """The outcome a cell of these outcomes is named after (None for no outcome at all)."""
    seen = set(outcomes)
    return next((outcome for outcome in PRECEDENCE if outcome in seen), None)


def cell_word(verdicts: Sequence[tuple[Outcome, str | None]]) -> str:
    """The word for a cell of ``(outcome, category)`` pairs: the terminal matrix's and the HTML
    report's, so both name a cell the same way."""
    if not verdicts:
        return "-"
    outcomes = Counter(outcome for outcome, _ in verdicts)
    worst = next(outcome for outcome in PRECEDENCE if outcomes[outcome])
    word = _WORDS.get(worst, worst.value)
    if worst is Outcome.ENV_FAULT:
        categories = sorted({category for outcome, category in verdicts if outcome is Outcome.ENV_FAULT and category})
        word = f"env_fault/{','.join(categories)}" if categories else word
    if outcomes[worst] != len(verdicts):
        word += f" {outcomes[worst]}/{len(verdicts)}"
    return word


def matrix(suites: Iterable[SuiteResult], checks: Sequence[str]) -> list[list[str]]:
    """Rows of ``[host, cell per check]`` for ``checks`` in order."""
    rows = []
    for suite in suites:
        by_check: dict[str, list[CaseResult]] = {}
        for case in suite.cases:
            by_check.setdefault(case.check or case.name, []).append(case)
        rows.append([suite.host, *(cell(by_check.get(check, ())) for check in checks)])
    return rows


def render_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(row[i])) for row in (header, *rows)) for i in range(len(header))]
    return "\n".join("  ".join(str(value).ljust(width) for value, width in zip(row, widths)).rstrip() for row in (header, *rows))
