"""Read JUnit XML test reports into per-test results, classifying each failure.

Accepted: gtest's ``--gtest_output=xml`` and pytest's ``--junit-xml`` (``xunit1`` and
``xunit2``), with a ``<testsuites>`` root or a bare ``<testsuite>``. Each ``<testcase>`` becomes
one :class:`CaseResult`:

- ``<failure>`` or ``<error>``: the element's text (its ``message`` attribute when the text is
  empty) goes through :func:`~harness.core.classifier.classify_case`: ``env_fault`` when it
  carries a fatal environment signature (the same rules as for logs), else ``fail``. Evidence
  line numbers point into the XML file.
- pytest's errors outside the test body (``failed on setup with "..."``: a fixture;
  ``failed on teardown with``; collection errors) without an environment signature are
  ``fail``, and the message names the phase. Not ``error``: that outcome is reserved for a
  broken harness or job spec, and a fixture is part of the suite under test, so its failure
  must stay as loud as any other; only a catalog signature may blame the environment.
- ``<skipped type="pytest.xfail">``: ``xfail``; any other ``<skipped>``, or a gtest test with
  ``status="notrun"`` (disabled): ``skip``.
- otherwise ``pass``.

Reports are untrusted input: they are refused above :data:`MAX_REPORT_BYTES` before parsing,
and parsed with ``defusedxml`` with DTDs, entity declarations and external references
forbidden (no billion laughs, no XXE). Anything unreadable raises :class:`IngestError`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from xml.sax import SAXParseException
from xml.sax.handler import ContentHandler

from harness.core.classifier import MAX_EVIDENCE, classify_case
from harness.core.outcomes import CaseResult, Outcome, Verdict
from harness.core.signatures import Catalog

MAX_REPORT_BYTES = 64 * 1024 * 1024  # gtest/pytest reports are KBs to a few MB

_BOM = b"\xef\xbb\xbf"
_PHASES = {  # pytest's <error message=...> prefixes, and what failed
    "failed on setup with": "setup (fixture) failed",
    "failed on teardown with": "teardown failed",
    "collection failure": "collection failed",
}


class IngestError(Exception):
    """A report that cannot be read: missing, too big, hostile or malformed."""

    def __init__(self, path: str, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


def looks_like_junit(head: bytes) -> bool:
    """Whether a file's first bytes are XML (a report) rather than a plain log."""
    head = head.removeprefix(_BOM).lstrip()
    return head.startswith((b"<?xml", b"<testsuites", b"<testsuite"))


def read_junit(path: str | Path, catalog: Catalog | None = None) -> tuple[CaseResult, ...]:
    """The test cases of one JUnit XML file, each with its classified verdict."""
    shown = str(path)
    try:
        with open(path, "rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            if size > MAX_REPORT_BYTES:
                raise IngestError(shown, f"report is {size} bytes; reports over {MAX_REPORT_BYTES} bytes are refused")
            data = stream.read(MAX_REPORT_BYTES + 1)
    except OSError as exc:
        raise IngestError(shown, exc.strerror or str(exc)) from None
    return parse_junit(data, shown, catalog)


def parse_junit(data: bytes, source: str, catalog: Catalog | None = None) -> tuple[CaseResult, ...]:
    """The test cases of one JUnit XML document; ``source`` names it in errors."""
    if len(data) > MAX_REPORT_BYTES:
        raise IngestError(source, f"report is over {MAX_REPORT_BYTES} bytes; refused")
    # Only here: defusedxml's SAX reader pulls in urllib and http.client (~30 ms of start-up
    # for every `harness classify` of a plain log).
    import defusedxml.sax
    from defusedxml import DTDForbidden, EntitiesForbidden, ExternalReferenceForbidden

    handler = _ReportHandler(source, catalog)
    try:
        defusedxml.sax.parseString(data, handler, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except DTDForbidden:
        raise IngestError(source, "DTDs are not allowed in test reports (entity expansion is refused)") from None
    except EntitiesForbidden:
        raise IngestError(source, "entity declarations are not allowed in test reports") from None
    except ExternalReferenceForbidden:
        raise IngestError(source, "external references are not allowed in test reports") from None
    except SAXParseException as exc:
        raise IngestError(
            source, f"malformed XML at line {exc.getLineNumber()}, column {exc.getColumnNumber() + 1}: {exc.getMessage()}"
        ) from None
    except LookupError as exc:  # found by tests/test_fuzz.py: <?xml encoding="TF-8"?>
        raise IngestError(source, f"the XML declaration names an encoding Python does not know: {exc}") from None
    if handler.root is None:
        raise IngestError(source, "empty report")
    return tuple(handler.cases)


def report_verdict(cases: tuple[CaseResult, ...] | list[CaseResult]) -> Verdict:
    """One verdict for a whole report: the worst of its cases, fail > env_fault > pass
    (skipped and xfailed cases count as passed). A report without cases is a failure: a
    mistyped ``--gtest_filter`` runs nothing and exits 0."""
    if not cases:
        return Verdict(Outcome.FAIL, message="the report lists no test cases")
    failed = [case for case in cases if case.outcome is Outcome.FAIL]
    env = [case for case in cases if case.outcome is Outcome.ENV_FAULT]
    for worst, adjective in ((failed, "failed"), (env, "hit environment faults")):
        if worst:
            first = worst[0]
            evidence = tuple(e for case in worst for e in case.verdict.evidence[:3])[:MAX_EVIDENCE]
            message = f"{len(worst)} of {len(cases)} test(s) {adjective}; first: {_case_name(first)}: {first.verdict.message}"
            return replace(first.verdict, message=message, evidence=evidence)
    counts = {outcome: sum(case.outcome is outcome for case in cases) for outcome in (Outcome.PASS, Outcome.SKIP, Outcome.XFAIL)}
    return Verdict(Outcome.PASS, message=", ".join(f"{n} {o}" for o, n in counts.items() if n))


def _case_name(case: CaseResult) -> str:
    return f"{case.classname}.{case.name}" if case.classname else case.name


# ---------------------------------------------------------------------------------------------


@dataclass
class _Element:
    """A <failure>, <error> or <skipped> of one test case."""

    kind: str
    message: str
    type: str
    line: int
    text_line: int | None = None
    parts: list[str] = field(default_factory=list)

    def text(self) -> tuple[str, int]:
        """The text to classify and the file line its first line is on."""
        text = "".join(self.parts)
        if text.strip():
            return text, self.text_line or self.line
        return self.message, self.line


@dataclass
class _Case:
    name: str
    classname: str
    time: str
    not_run: bool
    elements: list[_Element] = field(default_factory=list)

    def result(self, catalog: Catalog | None) -> CaseResult:
        problems = [e for e in self.elements if e.kind in ("failure", "error")]
        skipped = next((e for e in self.elements if e.kind == "skipped"), None)
        output = ""
        if problems:
            verdict = _problem_verdict(problems, catalog)
            output = "\n".join(problem.text()[0] for problem in problems)
        elif skipped is not None:
            outcome = Outcome.XFAIL if skipped.type == "pytest.xfail" else Outcome.SKIP
            verdict = Verdict(outcome, message=skipped.message or "".join(skipped.parts).strip())
        elif self.not_run:
            verdict = Verdict(Outcome.SKIP, message="not run (disabled)")
        else:
            verdict = Verdict(Outcome.PASS)
        return CaseResult(self.name, self.classname, verdict, duration=_seconds(self.time), output=output)


def _problem_verdict(problems: list[_Element], catalog: Catalog | None) -> Verdict:
    verdicts = [classify_case(text, catalog, first_line) for text, first_line in (p.text() for p in problems)]
    env = next((v for v in verdicts if v.outcome is Outcome.ENV_FAULT), None)
    if env is not None:
        return env  # the failure text itself names the environment (rule 1 of the classifier)
    phase = next((what for prefix, what in _PHASES.items() if problems[0].message.startswith(prefix)), None)
    first = verdicts[0]
    message = f"{phase}: {first.message}" if phase else first.message
    evidence = tuple(e for v in verdicts for e in v.evidence)[:MAX_EVIDENCE]
    return Verdict(Outcome.FAIL, message=message, evidence=evidence)


def _seconds(text: str) -> float:
    try:
        value = float(text.replace(",", ""))  # some writers group thousands
    except ValueError:
        return 0.0
    return value if value >= 0 else 0.0


class _ReportHandler(ContentHandler):
    """Streams the document; keeps only the test case being read and the finished results."""

    def __init__(self, source: str, catalog: Catalog | None):
        super().__init__()
        self.source = source
        self.catalog = catalog
        self.locator = None
        self.root: str | None = None
        self.case: _Case | None = None
        self.element: _Element | None = None
        self.cases: list[CaseResult] = []

    def setDocumentLocator(self, locator) -> None:
        self.locator = locator

    def _line(self) -> int:
        return self.locator.getLineNumber() if self.locator is not None else 0

    def startElement(self, name: str, attrs) -> None:
        if self.root is None:
            self.root = name
            if name not in ("testsuites", "testsuite"):
                raise IngestError(self.source, f"not a JUnit report: the root element is <{name}>")
        if name == "testcase":
            if self.case is not None:
                raise IngestError(self.source, f"line {self._line()}: <testcase> inside another <testcase>")
            self.case = _Case(
                name=attrs.get("name", ""),
                classname=attrs.get("classname", ""),
                time=attrs.get("time", ""),
                not_run=attrs.get("status") == "notrun",
            )
        elif self.case is not None and self.element is None and name in ("failure", "error", "skipped"):
            self.element = _Element(name, attrs.get("message", ""), attrs.get("type", ""), self._line())

    def characters(self, content: str) -> None:
        if self.element is not None:
            if self.element.text_line is None:
                self.element.text_line = self._line()
            self.element.parts.append(content)

    def endElement(self, name: str) -> None:
        if self.element is not None and name == self.element.kind:
            self.case.elements.append(self.element)  # type: ignore[union-attr]
            self.element = None
        elif name == "testcase" and self.case is not None:
            self.cases.append(self.case.result(self.catalog))
            self.case = None
