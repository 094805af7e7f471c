"""``harness classify FILE...``: judge test logs and JUnit reports after the fact.

Each FILE is a log (classified in one streaming pass, constant memory) or a gtest/pytest JUnit
XML report (recognized by its first bytes; its verdict is the worst of its cases). Exit
status: 2 if any file could not be read, else 1 if any failed, else 3 if any hit an
environment fault, else 0.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List

import typer

from harness.cli.app import app
from harness.core.classifier import classify_stream
from harness.core.ingest import IngestError, looks_like_junit, read_junit, report_verdict
from harness.core.outcomes import (
    EXIT_ENV_FAULT,
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    CaseResult,
    HarnessErrorKind,
    Outcome,
    Verdict,
)

_HEAD = 512  # bytes read to tell a report from a log
_EXIT = {Outcome.PASS: EXIT_OK, Outcome.FAIL: EXIT_FAILURE, Outcome.ENV_FAULT: EXIT_ENV_FAULT, Outcome.ERROR: EXIT_USAGE}
_SEVERITY = (EXIT_USAGE, EXIT_FAILURE, EXIT_ENV_FAULT, EXIT_OK)  # worst first


@app.command("classify")
def classify_command(
    files: List[Path] = typer.Argument(..., metavar="FILE...", help="Test logs or gtest/pytest JUnit XML reports."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per file, one per line."),
) -> None:
    """Tell real failures from environment faults in test logs and JUnit reports."""
    codes = []
    for path in files:
        verdict, cases = _judge(path)
        codes.append(_EXIT[verdict.outcome])
        if as_json:
            typer.echo(json.dumps(_as_json(path, verdict, cases)))
        else:
            typer.echo(_as_text(path, verdict))
    raise typer.Exit(min(codes, key=_SEVERITY.index))


def _judge(path: Path) -> tuple[Verdict, tuple[CaseResult, ...] | None]:
    """The verdict on one file, and its cases if it is a report. Unreadable input is reported
    on stderr and becomes an ``error`` verdict (category ``artifact``)."""
    try:
        with open(path, "rb") as stream:
            if not looks_like_junit(stream.read(_HEAD)):
                stream.seek(0)
                return classify_stream(stream), None
        cases = read_junit(path)  # checks the size before reading
        return report_verdict(cases), cases
    except IngestError as exc:
        reason = exc.reason
    except OSError as exc:
        reason = exc.strerror or str(exc)
    print(f"{path}: cannot read: {reason}", file=sys.stderr)
    return Verdict.error(HarnessErrorKind.ARTIFACT, f"cannot read: {reason}"), None


def _as_json(path: Path, verdict: Verdict, cases: tuple[CaseResult, ...] | None) -> dict:
    record = {
        "file": str(path),
        "outcome": verdict.outcome.value,
        "category": verdict.category.value if verdict.category else None,
        "evidence": [e.to_json() for e in verdict.evidence],
        "message": verdict.message,
    }
    if cases is not None:
        record["cases"] = [
            {
                "classname": case.classname,
                "name": case.name,
                "outcome": case.outcome.value,
                "category": case.verdict.category.value if case.verdict.category else None,
                "message": case.verdict.message,
                "evidence": [e.to_json() for e in case.verdict.evidence],
            }
            for case in cases
        ]
    return record


def _as_text(path: Path, verdict: Verdict) -> str:
    outcome = f"{verdict.outcome} ({verdict.category})" if verdict.category else str(verdict.outcome)
    lines = [f"{path}: {outcome}: {verdict.message}"]
    for evidence in verdict.evidence:
        tag = f"  [{evidence.signature}]" if evidence.signature else ""
        lines.append(f"    {evidence.line}: {evidence.text}{tag}")
    return "\n".join(lines)
