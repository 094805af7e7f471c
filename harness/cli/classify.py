"""``harness classify FILE...``: judge test logs and JUnit reports after the fact.

Each FILE is a log (classified in one streaming pass, constant memory) or a gtest/pytest JUnit
XML report (recognized by its first bytes; its verdict is the worst of its cases); ``-`` is a
log on standard input (``make test 2>&1 | harness classify -``). Exit
status: 2 if any file could not be read, else 1 if any failed, else 3 if any hit an
environment fault, else 0.

``--exit-code N`` is the exit status of the step that wrote the logs (CI knows it): a log that
states no verdict of its own passes with 0 and fails otherwise, and a non-zero status turns a
success summary into a failure. Without it, such a log is a failure that says ``no verdict``.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path
from typing import List, Optional

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
    files: List[Path] = typer.Argument(
        ..., metavar="FILE...", help="Test logs or gtest/pytest JUnit XML reports; - reads a log from standard input.",
    ),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per file, one per line."),
    exit_code: Optional[int] = typer.Option(
        None, "--exit-code", min=0, max=255, metavar="N",
        help="Exit status of the step that wrote the logs: decides a log that prints no verdict of its own.",
    ),
) -> None:
    """Tell real failures from environment faults in test logs and JUnit reports."""
    codes = []
    for path in files:
        verdict, cases = _judge(path, exit_code)
        codes.append(_EXIT[verdict.outcome])
        if as_json:
            typer.echo(json.dumps(_as_json(path, verdict, cases)))
        else:
            typer.echo(_as_text(path, verdict))
    raise typer.Exit(min(codes, key=_SEVERITY.index))


def _judge(path: Path, exit_code: int | None) -> tuple[Verdict, tuple[CaseResult, ...] | None]:
    """The verdict on one file, and its cases if it is a report. Unreadable input is reported
    on stderr and becomes an ``error`` verdict (category ``artifact``)."""
    try:
        with _open(path) as stream:
            head = stream.read(_HEAD)
            if not looks_like_junit(head):
                if stream.seekable():
                    stream.seek(0)
                    return classify_stream(stream, exit_code=exit_code), None
                # A pipe (`classify /dev/stdin`): what was read for the sniff goes first.
                return classify_stream(io.BufferedReader(_Prefixed(head, stream)), exit_code=exit_code), None
            if not stream.seekable() or _is_stdin(path):
                raise IngestError(str(path), "a JUnit report is read from a file, not standard input: save it first")
        cases = read_junit(path)  # checks the size before reading
        return report_verdict(cases), cases
    except IngestError as exc:
        reason = exc.reason
    except OSError as exc:
        reason = exc.strerror or str(exc)
    print(f"{path}: cannot read: {reason}", file=sys.stderr)
    return Verdict.error(HarnessErrorKind.ARTIFACT, f"cannot read: {reason}"), None


def _is_stdin(path: Path) -> bool:
    return str(path) == "-"


def _open(path: Path):
    """The file, or standard input for ``-`` (left open: it is not ours to close)."""
    return contextlib.nullcontext(sys.stdin.buffer) if _is_stdin(path) else open(path, "rb")


class _Prefixed(io.RawIOBase):
    """``head`` then the rest of ``stream``: a stream whose first bytes were already read."""

    def __init__(self, head: bytes, stream):
        self._head = memoryview(head)
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        return self._stream.readinto(buffer)


def _as_json(path: Path, verdict: Verdict, cases: tuple[CaseResult, ...] | None) -> dict:
    record = {
        "file": str(path),
        "outcome": verdict.outcome.value,
        "category": verdict.category.value if verdict.category else None,
        "evidence": [{**e.to_json(), "text": _cap(e.text)} for e in verdict.evidence],
        "message": _cap(verdict.message),
    }
    if cases is not None:
        record["cases"] = [
            {
                "classname": _cap(case.classname),
                "name": _cap(case.name),
                "outcome": case.outcome.value,
                "category": case.verdict.category.value if case.verdict.category else None,
                "message": _cap(case.verdict.message),
                "evidence": [{**e.to_json(), "text": _cap(e.text)} for e in case.verdict.evidence],
            }
            for case in cases
        ]
    return record


ECHO_LIMIT = 2000  # characters of a message or evidence line echoed: a 60 MB test name is not read out


def _cap(text: str) -> str:
    return text if len(text) <= ECHO_LIMIT else f"{text[:ECHO_LIMIT]}... [{len(text) - ECHO_LIMIT} more characters]"


def _as_text(path: Path, verdict: Verdict) -> str:
    outcome = f"{verdict.outcome} ({verdict.category})" if verdict.category else str(verdict.outcome)
    lines = [f"{path}: {outcome}: {_cap(verdict.message)}"]
    for evidence in verdict.evidence:
        tag = f"  [{evidence.signature}]" if evidence.signature else ""
        lines.append(f"    {evidence.line}: {_cap(evidence.text)}{tag}")
    return "\n".join(lines)
