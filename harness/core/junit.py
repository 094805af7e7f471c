"""The JUnit feed: CaseResults as JUnit XML that CI servers read (Jenkins xunit ``junit-10.xsd``).

CI must tell a broken lab from a broken card, so the outcome decides the element and its
``type``:

=========  ==============================================================================
pass       plain ``<testcase>``
fail       ``<failure type="fail">``, evidence lines as the body
xpass      ``<failure type="xpass">``: the known bug looks fixed, close it
env_fault  ``<error type="environment/<category>">``, message names the deciding evidence
error      ``<error type="harness/<kind>">``
skip       ``<skipped type="skip">``
xfail      ``<skipped type="xfail" message="known bug: <reason> (<link>)">``
flaky      a pass with one ``<flakyFailure>``/``<flakyError>`` per failed attempt (Surefire)
=========  ==============================================================================

Built on ``junit-xml``; its element tree is then corrected where it breaks the XSD (it emits
``disabled`` on every testsuite and times the schema's time pattern rejects) and extended
with what it lacks (``type`` on ``<skipped>``, rerun elements). Every caller-provided string
is stripped of characters XML 1.0 forbids, has secrets masked, and is bounded in size.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Iterable

import junit_xml

from harness.core import atomic
from harness.core.secretref import Masker
from harness.core.outcomes import (
    Attempt,
    CaseResult,
    Evidence,
    HarnessErrorKind,
    KnownBug,
    Outcome,
    SuiteResult,
    Verdict,
)

OUTPUT_LIMIT = 64 * 1024  # UTF-8 bytes per case output or evidence body
ATTEMPT_OUTPUT_LIMIT = 16 * 1024  # per flaky attempt: a flake may carry many attempts
MESSAGE_LIMIT = 4 * 1024  # messages are attributes; CI views show them on one line
CUT_MARKER = "--[ CUT DUE TO XML PER TEST LIMIT ]--"
NO_RESULTS = "harness/no-results"

# Anything outside XML 1.0's Char production, lone surrogates included: a parser rejects them.
_ILLEGAL_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_CUT = f"\n{CUT_MARKER}\n"

# Which result element each outcome becomes; pass and flaky have none (a flake is a pass).
_ELEMENT = {
    Outcome.FAIL: "failure",
    Outcome.XPASS: "failure",
    Outcome.ENV_FAULT: "error",
    Outcome.ERROR: "error",
    Outcome.SKIP: "skipped",
    Outcome.XFAIL: "skipped",
}
# Outcomes whose message also names the deciding evidence line.
_CITES_EVIDENCE = frozenset({Outcome.FAIL, Outcome.ENV_FAULT, Outcome.ERROR})
# Testsuite attributes junit-10.xsd allows; junit-xml adds ``disabled``, which it rejects.
_TESTSUITE_ATTRIBUTES = frozenset(
    {"name", "tests", "failures", "errors", "group", "time", "skipped", "timestamp",
     "hostname", "id", "package", "file", "log", "url"}
)


def synthetic_case(
    name: str, verdict: Verdict, classname: str | None = None, *, job: str | None = None, output: str = ""
) -> CaseResult:
    """A case that stands for a check that could not run at all (failed preflight, image
    build failed, no results): its classname ``harness.<job>`` marks it as the harness's own."""
    if classname is None:
        classname = f"harness.{job}" if job else "harness"
    return CaseResult(name=name, classname=classname, verdict=verdict, output=output, check=name)


def render(suites: Iterable[SuiteResult], name: str = "tt-harness", redact: Iterable[str] = ()) -> bytes:
    """The JUnit document (UTF-8, with XML declaration) for ``suites``; every occurrence of a
    value in ``redact`` is replaced by ``***``."""
    scrub = _Scrubber(redact)
    suites = list(suites)
    if not suites:
        # Nothing ran anywhere: say so, rather than hand CI an empty, green report.
        verdict = Verdict.error(HarnessErrorKind.INTERNAL, "no job ran on any host")
        suites = [SuiteResult(job=name, host="none", cases=(synthetic_case(NO_RESULTS, verdict, job=name),))]
    root = ET.Element("testsuites", {"name": scrub(name)})
    totals = dict.fromkeys(("tests", "failures", "errors"), 0)
    total_time = 0.0
    for suite in suites:
        element, seconds = _suite_element(suite, scrub)
        for key in totals:
            totals[key] += int(element.get(key))
        total_time += seconds
        root.append(element)
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", _time(total_time))
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def write(
    path: str | Path, suites: Iterable[SuiteResult], name: str = "tt-harness", redact: Iterable[str] = ()
) -> None:
    """Render and write atomically: a reader sees the previous report or the new one."""
    atomic.write_bytes(path, render(suites, name=name, redact=redact))


# ---------------------------------------------------------------------------------------------


class _Scrubber:
    """Makes caller text fit for the feed: legal XML characters, secrets masked, bounded."""

    def __init__(self, secrets: Iterable[str]):
        self._masker = Masker(_ILLEGAL_XML.sub("", str(secret)) for secret in secrets)

    def __call__(self, value: object, limit: int = MESSAGE_LIMIT) -> str:
        # Mask before bounding: a cut through a secret must not leave half of it behind.
        return _bound(self._masker.text(_ILLEGAL_XML.sub("", str(value))), limit)


def _bound(text: str, limit: int) -> str:
    """At most ``limit`` UTF-8 bytes: head and tail kept, the middle replaced by a marker."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    keep = (limit - len(_CUT.encode("utf-8"))) // 2
    # "ignore" drops a character the byte cut split in two.
    return data[:keep].decode("utf-8", "ignore") + _CUT + data[-keep:].decode("utf-8", "ignore")


def _duration(value: object) -> float:
    """Seconds as a finite, non-negative float: bad durations read as zero."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return 0.0
    return seconds if math.isfinite(seconds) and seconds > 0 else 0.0


def _time(value: object) -> str:
    # Fixed-point: the XSD's SUREFIRE_TIME pattern rejects junit-xml's str(float) ("1e-05").
    return f"{_duration(value):.3f}"


def _result_type(verdict: Verdict) -> str:
    if verdict.outcome is Outcome.ENV_FAULT:
        return f"environment/{verdict.category}"
    if verdict.outcome is Outcome.ERROR:
        return f"harness/{verdict.category}"
    return verdict.outcome.value


def _evidence_line(evidence: Evidence) -> str:
    # Evidence from a log has a line; from preflight or a build it has none.
    where = "" if evidence.line is None else f"line {evidence.line}: "
    signature = f" [signature: {evidence.signature}]" if evidence.signature else ""
    return f"{where}{evidence.text}{signature}"


def _evidence_body(verdict: Verdict) -> str:
    return "\n".join(_evidence_line(evidence) for evidence in verdict.evidence)


def _message(verdict: Verdict, known_bug: KnownBug | None = None) -> str:
    # Never empty: junit-xml silently drops a <failure>/<error> without message or body.
    if verdict.outcome is Outcome.XFAIL and known_bug is not None:
        return known_bug.describe()
    # Cleaned first: a message of only control characters is empty once written.
    text = _ILLEGAL_XML.sub("", verdict.message) or _result_type(verdict)
    if verdict.outcome in _CITES_EVIDENCE and verdict.evidence:
        text += f"; {_evidence_line(verdict.evidence[0])}"
    return text


def _suite_element(suite: SuiteResult, scrub: _Scrubber) -> tuple[ET.Element, float]:
    cases = tuple(suite.cases)
    if not cases:
        verdict = Verdict.error(
            HarnessErrorKind.INTERNAL, f"job {suite.job} on host {suite.host} produced no test results"
        )
        cases = (synthetic_case(NO_RESULTS, verdict, job=suite.job),)
    properties = sorted(
        (scrub(key), scrub(value)) for key, value in suite.properties.items() if value is not None
    )
    junit_suite = junit_xml.TestSuite(
        scrub(suite.name),
        [_junit_case(case, suite.job, scrub) for case in cases],
        hostname=scrub(suite.host),
        timestamp=scrub(suite.timestamp) if suite.timestamp else None,
        properties=dict(properties),
    )
    element = junit_suite.build_xml_doc()
    for attribute in set(element.attrib) - _TESTSUITE_ATTRIBUTES:
        del element.attrib[attribute]

    counts = {"failure": 0, "error": 0, "skipped": 0}
    for case, case_element in zip(cases, element.iter("testcase")):
        _complete_case(case_element, case, scrub)
        tag = _ELEMENT.get(case.outcome)
        if tag is not None:
            counts[tag] += 1
    element.set("tests", str(len(cases)))
    element.set("failures", str(counts["failure"]))
    element.set("errors", str(counts["error"]))
    element.set("skipped", str(counts["skipped"]))
    # The suite's wall time when the caller measured it, else what its cases took.
    seconds = _duration(suite.duration) or _duration(sum(_duration(case.duration) for case in cases))
    element.set("time", _time(seconds))
    return element, seconds


def _junit_case(case: CaseResult, job: str, scrub: _Scrubber) -> junit_xml.TestCase:
    junit_case = junit_xml.TestCase(
        scrub(case.name),
        classname=scrub(case.classname or job),  # Buildkite and GitLab need a classname
        stdout=scrub(case.output, OUTPUT_LIMIT) or None,
    )
    tag = _ELEMENT.get(case.outcome)
    if tag is not None:
        add = {
            "failure": junit_case.add_failure_info,
            "error": junit_case.add_error_info,
            "skipped": junit_case.add_skipped_info,
        }[tag]
        add(
            message=scrub(_message(case.verdict, case.known_bug)),
            output=scrub(_evidence_body(case.verdict), OUTPUT_LIMIT) or None,
        )
    return junit_case


def _complete_case(element: ET.Element, case: CaseResult, scrub: _Scrubber) -> None:
    """What junit-xml cannot say: result types, a valid time, the failed attempts of a flake."""
    element.set("time", _time(case.duration))
    tag = _ELEMENT.get(case.outcome)
    if tag is not None:
        element.find(tag).set("type", _result_type(case.verdict))
    if case.outcome is Outcome.FLAKY:
        _add_flakes(element, case, scrub)


def _add_flakes(element: ET.Element, case: CaseResult, scrub: _Scrubber) -> None:
    failed = [
        (number, attempt)
        for number, attempt in enumerate(case.attempts, 1)
        if _ELEMENT.get(attempt.verdict.outcome) in ("failure", "error")
    ]
    if not failed:
        # A flaky verdict without its attempts: still show the flake rather than a clean pass.
        flake = ET.Element("flakyFailure", {"type": "flaky", "message": scrub(case.verdict.message or "flaky")})
        element.insert(0, flake)
        return
    for position, (number, attempt) in enumerate(failed):
        element.insert(position, _flake_element(number, len(case.attempts), attempt, scrub))


def _flake_element(number: int, total: int, attempt: Attempt, scrub: _Scrubber) -> ET.Element:
    """``<flakyFailure>``/``<flakyError>`` (Surefire's rerunType) for one failed attempt."""
    verdict = attempt.verdict
    tag = "flakyFailure" if _ELEMENT[verdict.outcome] == "failure" else "flakyError"
    element = ET.Element(
        tag,
        {"type": _result_type(verdict), "message": scrub(f"attempt {number} of {total}: {_message(verdict)}")},
    )
    # rerunType's children come in this order: stackTrace, system-out, system-err.
    evidence = scrub(_evidence_body(verdict), OUTPUT_LIMIT)
    if evidence:
        ET.SubElement(element, "stackTrace").text = evidence
    output = scrub(attempt.output, ATTEMPT_OUTPUT_LIMIT)
    if output:
        ET.SubElement(element, "system-out").text = output
    return element
