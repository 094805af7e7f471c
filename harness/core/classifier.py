"""Classify a test log, or one test's failure text: real failure, environment fault, or pass.

The rules (they are the product):

1. **Fatal environment signatures decide env faults.** A line matching a ``fatal`` entry of the
   signature catalog (``configs/signatures.yaml``: verbatim tt-umd / tt-metal / tt-smi / KMD /
   Docker / SSH / network strings) marks the test it occurs in as an ``env_fault`` of that
   entry's category, whatever else that test printed: an exception in a gtest fixture's
   ``SetUp()`` carrying ``No chips detected in the cluster`` is a broken container, not a
   broken kernel, and so is every other test of the fixture failing the same way.
2. **Warnings never decide.** ``warning`` entries (``bind_area_to_memory_nodeset() failed``,
   ``Insufficient NumHugepages``, ...) are kept as context in the evidence; a pass stays a
   pass and a real failure stays a real failure.
3. **A failure without a fatal signature is real.** Assertion text (gtest
   ``file.cpp:NNN: Failure`` / ``Value of:`` / ``Expected:`` / ``Actual:``, pytest ``E   ...``
   lines and ``AssertionError``, ``PCC check failed``), an uncaught exception or a crash
   (``Segmentation fault``, ``Aborted (core dumped)``, ``terminate called after throwing``) in a
   test with no fatal signature is a ``fail``. Keywords alone never make an env fault: only
   catalog entries, which are specific verbatim strings, do; ``Expected: device output matches
   reference`` is a real failure.
4. **Hangs are env faults of category ``device-hang``, flagged as ambiguous.** A PCIe, NOC or
   dispatch hang (``Read 0xffffffff from PCIE: you should reset the board.``, ``NOC0 appears
   hung``, ``TIMEOUT: device timeout, potential hang detected``) is reported with the advice
   that only a rerun after a board reset (``tt-smi -r``) tells a sick board from a kernel that
   hangs it.
5. **Test failure text outranks other log lines** (tt-metal's own classifier does the same):
   a fatal signature outside any test does not turn a real test failure into an env fault;
   only one inside the failing test's own output does.
6. **The cause, not the symptom.** A fatal entry may name the categories it is a symptom of
   (``symptom_of``); when an earlier line of the log names one of them (a warning included), the
   verdict takes that cause's category and carries both lines.
7. **A wait that never ended decides.** ``wait`` entries (a device lock held by another process,
   ethernet training in progress) are context while the run goes on; a test, or the run, that
   ends or is killed while still waiting is an env fault of the wait's category. Failure text
   after the wait means the wait ended: the failure is judged as usual.

How a log is read:

- Lines are attributed to the test running when they were printed: a gtest test runs from
  ``[ RUN      ] X`` to ``[       OK ] X`` / ``[  FAILED  ] X`` / ``[  SKIPPED ] X``; a pytest
  failure's details run from its ``____ name ____`` header in the ``FAILURES`` or ``ERRORS``
  section to the next header or section. Lines outside any test belong to the process.
- A log that ends inside a gtest test (the process died or was killed mid-test) counts that
  test as failed: env fault if it printed a fatal signature, else a real failure.
- Outcome of the whole log, first that applies: any test failed for real, or the process
  crashed or failed an assertion outside any test without a fatal signature: ``fail``; any
  test failed with a fatal signature, or a fatal signature appeared outside any test:
  ``env_fault`` (a run whose environment broke is not a run to trust, even if its tests
  passed); only summary lines say something failed (gtest's ``[  FAILED  ]`` list, pytest's
  ``FAILED id - msg`` lines or ``1 failed, 2 passed``, with no per-test details): ``fail``,
  unless the summary line itself carries a fatal signature (a ``fail`` line of the summary
  catalog, ``configs/summaries.yaml``, counts the same way); the run ended while still waiting:
  ``env_fault``; an explicit success marker (gtest ``[  PASSED  ] N tests.``, pytest ``N passed
  in Xs``, a ``pass`` line of the summary catalog): ``pass``, unless the step's exit code, when
  the caller gives it, is non-zero.
- **Nothing recognizable is a ``fail``** with the message "no verdict in log", unless the
  caller gives the step's exit code: 0 passes it. A log without a success marker is a
  truncated log, a runner killed before printing, or a binary that never started; calling it a
  pass would hide exactly the runs a kernel engineer needs to look at, and no fatal signature
  means there is no evidence to blame the environment.

Logs are read in one streaming pass in constant memory: a combined search for the catalog's
anchors (see :class:`~harness.core.signatures.PatternSet`) finds candidate lines, only those
are decoded and matched, and only a bounded number of evidence lines is kept. Line numbers
are exact; a line longer than 1 MiB is matched in overlapping 1 MiB pieces (a match longer
than the 256 KiB overlap could be missed, one inside it may be reported twice).

A regular file of more than 64 MB (``classify_file``, or ``classify_stream`` of an open file)
is searched by one worker process per CPU, since the anchor search is nearly all of the work;
this process, which needs the candidate lines in order, judges them as they come back. The
file is cut into tasks of a few chunks. Each worker reads its task with ``pread`` in the very
chunks, at the very offsets, the single-process reader uses, and returns the candidate lines
and how many newlines it passed, from which this process numbers them. A task begins at the
first chunk boundary where the single-process reader carries over only the unfinished line
after the previous chunk's last newline (a chunk without a newline moves the boundary on), and
its worker starts with that line as its carry: from there it is in the very state of the
single-process reader, so it finds the same lines with the same numbers and cuts an overlong
line into the same pieces, and the verdict is the same. Memory stays bounded: a chunk or two
per worker and at most a few tasks' results waiting. Streams, line iterators and smaller files
are read in this process only.
"""

from __future__ import annotations

import array
import collections
import enum
import functools
import io
import os
import re
import stat
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator

from harness.core.outcomes import EnvCategory, Evidence, Outcome, Verdict
from harness.core.signatures import Catalog, PatternSet, Signature, default_catalog
from harness.core.summaries import Summary, default_summaries

__all__ = ["classify_log", "classify_stream", "classify_file", "classify_case", "HANG_ADVICE"]

HANG_ADVICE = (
    "only a rerun after a board reset (tt-smi -r) can tell a sick board from a kernel that hangs it"
)

MAX_EVIDENCE = 10  # evidence lines per verdict
_PER_TEST = 6  # deciding lines kept per test, per kind
_MAX_TEXT = 400  # characters of one evidence line
_CHUNK = 4 << 20  # bytes read at a time
_MAX_LINE = 1 << 20  # a longer line is matched in pieces, keeping memory bounded


class _Marker(enum.Enum):
    """Test-runner output the classifier understands (the catalog holds environment strings)."""

    GTEST_RUN = r"^\[ RUN      \] (?P<name>\S+)"
    GTEST_OK = r"^\[       OK \] (?P<name>\S+)"
    GTEST_FAILED = r"^\[  FAILED  \] (?P<name>\S+)"
    GTEST_SKIPPED = r"^\[  SKIPPED \] (?P<name>\S+)"
    GTEST_PASSED = r"^\[  PASSED  \] \d+ tests?\."
    GTEST_LOCATION = r"^(?:unknown file|\S.*:\d+): Failure$"
    GTEST_EXPECT = r"^(?:Value of: |Expected: |  Actual: |Expected equality of these values:|Which is: )"
    CPP_EXCEPTION = r'C\+\+ exception with description "'
    THROWN_IN = r'" thrown in (?P<where>SetUp\(\)|TearDown\(\)|the test body|the test fixture\'s constructor|SetUpTestSuite\(\)|TearDownTestSuite\(\))'
    CRASH = (
        r"Segmentation fault|Aborted \(core dumped\)|terminate called (?:after throwing an instance of|without an "
        r"active exception)|\*\*\* Process received signal \*\*\*|Fatal Python error: |Bus error"
    )
    EXCEPTION = r"^Traceback \(most recent call last\):|TT_(?:FATAL|THROW) @ "
    ASSERTION = r"^(?:E {3,})?AssertionError\b|^[^>].*PCC [Cc]heck failed"  # not pytest's echo of the source
    PY_SECTION = r"^=+ (?P<title>FAILURES|ERRORS|PASSES) =+$"
    PY_HEADER = r"^_+ (?P<title>.*\S) _{8,}$"  # 8: a long needle keeps the search fast
    PY_E_LINE = r"^E {3,}\S"
    PY_RESULT = r"^(?P<name>\S+::\S+) (?P<result>PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)\b"
    PY_SHORT = r"^(?P<result>FAILED|ERROR) (?P<name>\S+)(?: - (?P<msg>.*))?$"
    PY_PASSED = r"^=*\s*(?P<counts>(?:\d+ \w+, )*\d+ passed(?:, \d+ \w+)*) in \d+(?:\.\d+)?s\b"
    # the run was killed: bash's job report, coreutils timeout --verbose, a cancelled CI job
    # (never decides alone)
    KILLED = (
        r"^(?:\S+: line \d+: +\d+ )?(?:Terminated|Killed)\b|^timeout: sending signal (?:TERM|KILL) to command"
        r"|##\[error\]The operation was canceled\."
    )
    # a line that quotes values being compared, not something that happened: pytest's assertion
    # rewriting (its echo of the source, `assert` lines and their diffs) and gtest's values
    QUOTED = (
        r"^>   |^(?:E {3,})?(?:AssertionError: )?assert |^E {5,}[-+?] |^E {3,}\+  where "
        r"|^(?:FAILED|ERROR) \S+ - (?:AssertionError: )?assert "
        r"|^\s*(?:Value of: |Expected: |Actual: |Which is: |To be equal to: )"
    )


_FAILURE_TEXT = frozenset(
    {
        _Marker.GTEST_LOCATION,
        _Marker.GTEST_EXPECT,
        _Marker.CPP_EXCEPTION,
        _Marker.THROWN_IN,
        _Marker.CRASH,
        _Marker.EXCEPTION,
        _Marker.ASSERTION,
        _Marker.PY_E_LINE,
    }
)
_PY_FAILED_COUNTS = re.compile(r"\b\d+ (?:failed|errors?)\b")


@functools.lru_cache(maxsize=8)
def _patterns(catalog: Catalog) -> PatternSet:
    keys: list = [(sig, sig.pattern) for sig in catalog]
    keys += [(marker, re.compile(marker.value)) for marker in _Marker]
    keys += [(summary, summary.pattern) for summary in default_summaries()]
    return PatternSet(keys)


# ---------------------------------------------------------------------------------------------
# Judging one test's lines


@dataclass
class _Unit:
    """The deciding lines of one test; with ``name`` None, of the process outside any test."""

    name: str | None
    start: Evidence | None = None  # the line that opened the test
    fatal: list[_Hit] = field(default_factory=list)
    failure: list[Evidence] = field(default_factory=list)
    where: str | None = None  # gtest fixture stage or pytest phase the failure happened in
    waiting: _Hit | None = None  # a wait (for a lock, a link) nothing after it has shown to end
    crash_cause: _Hit | None = None  # a warning that explains a crash after it (explains_crash)
    crashed_after_cause: bool = False  # its only failure text is a crash after that warning

    def add(self, evidence: Evidence, hit: _Hit | None, markers: dict) -> None:
        failure_text = any(marker in _FAILURE_TEXT for marker in markers)
        if hit is not None and hit.signature.fatal and len(self.fatal) < _PER_TEST:
            self.fatal.append(hit)
        if failure_text:
            # a crash right after a warning that explains it (a failed hugepage mapping) is that
            # warning's fault; any other failure text first makes it a failure like any other
            self.crashed_after_cause = (
                self.crash_cause is not None and _Marker.CRASH in markers and (self.crashed_after_cause or not self.failure)
            )
            if len(self.failure) < _PER_TEST:
                self.failure.append(evidence)
        if hit is not None and hit.signature.explains_crash and self.crash_cause is None and not self.failure:
            self.crash_cause = hit
        if hit is not None and hit.signature.wait:
            self.waiting = hit
        elif failure_text or (hit is not None and hit.signature.fatal):
            self.waiting = None  # what failed after the wait ended is what decides

    def verdict(self, causes: _Causes, closing: Evidence | None = None) -> Verdict:
        """The verdict of a unit known to have failed."""
        subject = f"{self.name}: " if self.name else ""
        stage = f" in {self.where}" if self.where else ""
        if self.fatal:
            return _env_verdict(self.fatal, f"{subject}failed{stage} with an environment fault", causes)
        if self.waiting is not None:
            return _still_waiting(self.waiting, f"{subject}failed{stage}")
        if self.crashed_after_cause and self.crash_cause is not None:
            cause = self.crash_cause
            category = cause.signature.category
            message = f"{subject}crashed{stage} after an environment fault ({category}): {cause.matched} [{cause.signature.id}]"
            return Verdict.env_fault(category, message, [cause.evidence, *self.failure][:MAX_EVIDENCE])
        evidence = self.failure + ([closing] if closing else [])
        first = self.failure[0].text if self.failure else "no assertion or crash text found"
        return Verdict(Outcome.FAIL, message=f"{subject}failed{stage}: {first}", evidence=tuple(evidence[:MAX_EVIDENCE]))


@dataclass(frozen=True)
class _Hit:
    """A line that matched a signature: the evidence, the signature, the matched words."""

    evidence: Evidence
    signature: Signature
    matched: str


_Causes = dict[EnvCategory, "_Hit"]  # the first line naming each category, fatal or not


def _note_cause(causes: _Causes, hit: _Hit | None) -> None:
    if hit is not None:
        causes.setdefault(hit.signature.category, hit)


def _env_verdict(fatal: list[_Hit], context: str, causes: _Causes) -> Verdict:
    """An env fault named by its first fatal line or, when that line is a symptom (its entry's
    ``symptom_of``) of a cause an earlier line names, by the cause, with both lines as evidence."""
    first = next((hit for hit in fatal if not hit.signature.cause_follows), fatal[0])
    evidence = [first.evidence] + [hit.evidence for hit in fatal if hit is not first]
    cause = next(
        (
            causes[category]
            for category in first.signature.symptom_of
            if category in causes and (causes[category].evidence.line or 0) < (first.evidence.line or 0)
        ),
        None,
    )
    if cause is not None:
        category = cause.signature.category
        message = (
            f"{context} ({category}): {cause.matched} [{cause.signature.id}], "
            f"which then caused: {first.matched} [{first.signature.id}]"
        )
        evidence.insert(0, cause.evidence)
    else:
        category = first.signature.category
        message = f"{context} ({category}): {first.matched} [{first.signature.id}]"
    if category is EnvCategory.DEVICE_HANG:
        message += f"; {HANG_ADVICE}"
    return Verdict.env_fault(category, message, evidence[:MAX_EVIDENCE])


def _still_waiting(wait: _Hit, context: str) -> Verdict:
    """A run that ended (killed, timed out, or just stopped) while it still waited for something
    only the environment can give: a device lock another process holds, a link that never trains."""
    category = wait.signature.category
    message = f"{context} while still waiting ({category}): {wait.matched} [{wait.signature.id}]"
    return Verdict.env_fault(category, message, [wait.evidence])


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 3] + "..."


def _read_line(number: int, text: str, matches: list) -> tuple[Evidence, _Hit | None, dict]:
    """Evidence for one line, the signature naming it (the first fatal one in catalog order,
    else the first warning), and the runner markers it matched. A line quoting the values of a
    failed comparison names no signature: a test expecting "No chips detected" is not a host
    without chips."""
    quoted = any(key is _Marker.QUOTED for key, _ in matches)
    signatures = [] if quoted else [(key, match) for key, match in matches if isinstance(key, Signature)]
    named = next(((s, m) for s, m in signatures if s.fatal), signatures[0] if signatures else None)
    evidence = Evidence(number, _clip(text), named[0].id if named else None)
    hit = _Hit(evidence, named[0], _clip(named[1].group())) if named else None
    return evidence, hit, {key: match for key, match in matches if not isinstance(key, Signature)}


# ---------------------------------------------------------------------------------------------
# One test's failure text (from a JUnit report)


def classify_case(failure_text: str, catalog: Catalog | None = None, first_line: int = 1) -> Verdict:
    """The verdict on one test case known to have failed, from its failure or error text:
    ``env_fault`` if the text carries a fatal signature, else ``fail``. ``first_line`` is the
    line number of the text's first line in its file, for the evidence."""
    patterns = _patterns(catalog or default_catalog())
    unit = _Unit(None)
    causes: _Causes = {}
    context: list[Evidence] = []
    first_text: Evidence | None = None
    for offset, line in enumerate(failure_text.split("\n")):
        evidence, hit, markers = _read_line(first_line + offset, line.rstrip("\r"), patterns.match(line))
        unit.add(evidence, hit, markers)
        _note_cause(causes, hit)
        if hit is not None and not hit.signature.fatal and len(context) < _PER_TEST:
            context.append(evidence)
        if first_text is None and line.strip():
            first_text = evidence
    if unit.fatal:
        return _env_verdict(unit.fatal, "failed with an environment fault", causes)
    if unit.waiting is not None:
        return _still_waiting(unit.waiting, "failed")
    evidence = unit.failure or ([first_text] if first_text else [])
    summary = evidence[0].text.strip() if evidence else "no failure text"
    return Verdict(Outcome.FAIL, message=summary, evidence=tuple((evidence + context)[:MAX_EVIDENCE]))


# ---------------------------------------------------------------------------------------------
# A whole log


@dataclass
class _Tally:
    """Tests that failed one way: how many, and the first ones' verdicts."""

    count: int = 0
    verdicts: list[Verdict] = field(default_factory=list)

    def add(self, verdict: Verdict) -> None:
        self.count += 1
        if len(self.verdicts) < MAX_EVIDENCE:
            self.verdicts.append(verdict)

    def evidence(self) -> tuple[Evidence, ...]:
        # a few lines from each of the first tests rather than all lines of the first one
        return tuple(e for v in self.verdicts for e in v.evidence[:3])[:MAX_EVIDENCE]


class _LogJudge:
    """Consumes the candidate lines of one log in order and produces its verdict."""

    def __init__(self, exit_code: int | None = None) -> None:
        self.exit_code = exit_code  # of the step that wrote the log, when the caller knows it
        self.process = _Unit(None)
        self.test: _Unit | None = None
        self.test_is_gtest = False
        self.section: str | None = None  # current pytest section title
        self.real = _Tally()
        self.env = _Tally()
        self.summary: list[tuple[Evidence, _Hit | None]] = []
        self.summary_count = 0
        self.success: Evidence | None = None
        self.killed: Evidence | None = None
        self.causes: _Causes = {}
        self.context: list[Evidence] = []  # warnings, for the record

    # -- feeding -------------------------------------------------------------------------
    def line(self, number: int, text: str, matches: list) -> None:
        evidence, hit, markers = _read_line(number, text, matches)
        if hit is not None and not hit.signature.fatal and len(self.context) < MAX_EVIDENCE:
            self.context.append(evidence)
        _note_cause(self.causes, hit)
        self._boundaries(markers, evidence, hit)
        unit = self.test or self.process
        unit.add(evidence, hit, markers)
        thrown = markers.get(_Marker.THROWN_IN)
        if thrown and unit.where is None:
            unit.where = thrown.group("where")

    def _boundaries(self, markers: dict, evidence: Evidence, hit: _Hit | None) -> None:
        if markers.get(_Marker.KILLED) is not None:
            self.killed = self.killed or evidence
        summary = next((key for key in markers if isinstance(key, Summary)), None)
        if summary is not None:
            self._close(None)
            if summary.verdict is Outcome.PASS:
                self._succeeded(evidence)
            else:
                self._summary(evidence, hit)
        elif (m := markers.get(_Marker.GTEST_RUN)) is not None:
            self._close(None)
            self.process.waiting = None  # the run went on: whatever it waited for came
            self.test, self.test_is_gtest = _Unit(m.group("name"), evidence), True
        elif (m := markers.get(_Marker.GTEST_OK)) is not None or (m := markers.get(_Marker.GTEST_SKIPPED)) is not None:
            if self._is_current(m.group("name")):
                self.test = None
        elif (m := markers.get(_Marker.GTEST_FAILED)) is not None:
            if self._is_current(m.group("name")):
                self._close(evidence)
            elif not m.group("name").isdigit():  # the list after "[  FAILED  ] 7 tests, listed below:"
                self._summary(evidence, hit)
        elif (m := markers.get(_Marker.GTEST_PASSED)) is not None:
            self._close(None)
            self._succeeded(evidence)
        elif (m := markers.get(_Marker.PY_SECTION)) is not None:
            self._close(None)
            self.section = m.group("title")
        elif (m := markers.get(_Marker.PY_HEADER)) is not None and self.section in ("FAILURES", "ERRORS"):
            self._close(None)
            title = m.group("title")
            self.test, self.test_is_gtest = _Unit(title, evidence), False
            phase = re.match(r"ERROR at (setup|teardown) of ", title)
            if phase:
                self.test.where = phase.group(1)
        elif (m := markers.get(_Marker.PY_PASSED)) is not None:
            self._close(None)
            self.section = None
            if _PY_FAILED_COUNTS.search(m.group("counts")):
                self._summary(evidence, hit)
            else:
                self._succeeded(evidence)
        elif markers.get(_Marker.PY_SHORT) is not None:
            self._close(None)  # the short summary follows the last failure's details
            self._summary(evidence, hit)
        elif (m := markers.get(_Marker.PY_RESULT)) is not None and m.group("result") in ("FAILED", "ERROR"):
            self._summary(evidence, hit)

    def _succeeded(self, evidence: Evidence) -> None:
        self.success = self.success or evidence
        self.process.waiting = None

    def _is_current(self, name: str) -> bool:
        return self.test is not None and self.test_is_gtest and self.test.name == name.rstrip(",")

    def _close(self, closing: Evidence | None) -> None:
        """End the current test. gtest tests end here only by failing (passing and skipped ones
        are dropped where they end); pytest detail blocks are failures by construction."""
        test, self.test = self.test, None
        if test is None:
            return
        if self.test_is_gtest and closing is None and test.start is not None:
            # a new test started, or the log ended, without this one's result line: it died
            test.failure.insert(0, replace(test.start, text=f"{test.start.text} (never reported a result)"))
        verdict = test.verdict(self.causes, closing)
        (self.env if verdict.outcome is Outcome.ENV_FAULT else self.real).add(verdict)

    def _summary(self, evidence: Evidence, hit: _Hit | None) -> None:
        self.summary_count += 1
        if len(self.summary) < MAX_EVIDENCE:
            self.summary.append((evidence, hit))

    # -- the verdict ---------------------------------------------------------------------
    def verdict(self) -> Verdict:
        self._close(None)
        process = self.process
        if process.failure and not process.fatal and not self.env.count:
            # a crash or assertion outside any test, with no fatal signature anywhere to explain it
            message = f"outside any test: {process.failure[0].text}"
            self.real.add(Verdict(Outcome.FAIL, message=message, evidence=tuple(process.failure[:MAX_EVIDENCE])))
        if self.real.count:
            message = f"{self.real.count} failure(s), first: {self.real.verdicts[0].message}"
            if self.env.count or process.fatal:
                message += "; environment faults were also seen"
            return Verdict(Outcome.FAIL, message=message, evidence=self.real.evidence())
        if self.env.count:
            first = self.env.verdicts[0]
            message = f"{self.env.count} test(s) failed with environment faults; first: {first.message}"
            return replace(first, message=message, evidence=self.env.evidence())
        if process.fatal:
            return _env_verdict(process.fatal, "environment fault", self.causes)
        if self.summary_count:
            fatal = [hit for _, hit in self.summary if hit is not None and hit.signature.fatal]
            if fatal:
                return _env_verdict(fatal, f"{self.summary_count} test(s) failed", self.causes)
            first = self.summary[0][0]
            return Verdict(
                Outcome.FAIL,
                message=f"{self.summary_count} test(s) reported failed (no failure details in the log): {first.text}",
                evidence=tuple(e for e, _ in self.summary)[:MAX_EVIDENCE],
            )
        if process.waiting is not None and self.exit_code != 0:
            return _still_waiting(process.waiting, "the run ended" if self.killed is None else "the run was killed")
        return self._verdict_of_success()

    def _verdict_of_success(self) -> Verdict:
        """No failure and no environment fault: a success summary, the step's exit code, or no verdict."""
        exited = f"the step exited {self.exit_code}"
        if self.success is not None:
            if self.exit_code:  # the log says it passed, the step says it did not: trust the failure
                return Verdict(Outcome.FAIL, message=f"{exited} although the log reports success: {self.success.text}", evidence=(self.success, *self.context)[:MAX_EVIDENCE])
            return Verdict(Outcome.PASS, message=self.success.text, evidence=(self.success, *self.context)[:MAX_EVIDENCE])
        killed = (self.killed,) if self.killed else ()
        if self.exit_code == 0:
            return Verdict(Outcome.PASS, message=f"{exited}, and the log shows no failure and no environment fault (no summary in it)", evidence=tuple(self.context))
        why = "no success marker, no failure and no environment signature"
        if self.killed is not None:
            why += f"; the run was killed: {self.killed.text}"
        if self.exit_code is not None:
            why += f"; {exited}"
        return Verdict(Outcome.FAIL, message=f"no verdict in log: {why}", evidence=(*killed, *self.context)[:MAX_EVIDENCE])


class _Scanner:
    """Finds the candidate lines (those containing an anchor) of a log fed to it in chunks,
    numbering them by counting newlines. ``carry`` is an unfinished line the log starts with."""

    def __init__(self, patterns: PatternSet, carry: bytes = b"") -> None:
        self.patterns = patterns
        self.carry = carry
        self.line = 1  # the number of the line ``carry`` belongs to

    def feed(self, data: bytes) -> Iterator[tuple[int, bytes]]:
        """The (line number, raw bytes) of each candidate line completed by ``data``."""
        start = 0
        if self.carry:
            first = data.find(b"\n")
            if first == -1:
                yield from self._unfinished(self.carry + data)
                return
            # The carried line ends in `data`: search it on its own rather than copy the chunk
            # behind it (the same lines, numbered the same, as searching `carry + data`).
            head = self.carry + data[: first + 1]
            yield from self._lines(head, 0, len(head))
            start = first + 1
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            yield from self._unfinished(data)
            return
        yield from self._lines(data, start, cut)
        self.carry = data[cut:]

    def _unfinished(self, buf: bytes) -> Iterator[tuple[int, bytes]]:
        """``buf`` holds no newline: carry it over, or match an overlong line's piece."""
        if len(buf) < _MAX_LINE:
            self.carry = buf
            return
        # an overlong line: match this piece, and again its tail with the next piece
        yield from self._lines(buf, 0, len(buf))
        self.carry = buf[-(_MAX_LINE // 4) :]

    def finish(self) -> Iterator[tuple[int, bytes]]:
        """The last line, if the log does not end with a newline."""
        if self.carry:
            yield from self._lines(self.carry, 0, len(self.carry))

    def _lines(self, buf: bytes, start: int, end: int) -> Iterator[tuple[int, bytes]]:
        # ``buf[start:end]`` starts a line and ends at a line boundary, or is a piece of an overlong line
        position = start
        for begin, stop in self.patterns.candidate_lines(buf, start, end):
            self.line += buf.count(b"\n", position, begin)
            yield self.line, buf[begin:stop]
            position = begin
        self.line += buf.count(b"\n", position, end)


def _judge(candidates: Iterable[tuple[int, bytes]], patterns: PatternSet, exit_code: int | None = None) -> Verdict:
    judge = _LogJudge(exit_code)
    for number, raw in candidates:
        text = raw.decode("utf-8", "replace").rstrip("\r")
        judge.line(number, text, patterns.match(text, raw))
    return judge.verdict()


def _candidates(chunks: Iterable[bytes], patterns: PatternSet) -> Iterator[tuple[int, bytes]]:
    scanner = _Scanner(patterns)
    for data in chunks:
        yield from scanner.feed(data)
    yield from scanner.finish()


def _judge_chunks(chunks: Iterable[bytes], catalog: Catalog | None, exit_code: int | None) -> Verdict:
    patterns = _patterns(catalog or default_catalog())
    return _judge(_candidates(chunks, patterns), patterns, exit_code)


def classify_stream(stream: BinaryIO, catalog: Catalog | None = None, exit_code: int | None = None) -> Verdict:
    """Classify a log read from a binary stream, in big chunks and constant memory. A big
    regular file is scanned by all CPUs (see the module documentation). ``exit_code`` is the
    exit status of the step that wrote the log, when known: it decides a log that states no
    verdict of its own, and a non-zero one overrides a success summary."""
    workers = _parallel_workers(stream)
    if workers > 1:
        return _classify_in_parallel(stream, _patterns(catalog or default_catalog()), workers, exit_code)
    return _judge_chunks(iter(lambda: stream.read(_CHUNK), b""), catalog, exit_code)


def classify_file(path: str | Path, catalog: Catalog | None = None, exit_code: int | None = None) -> Verdict:
    """Classify a log file (the fast path for big logs). Raises OSError if it can't be read."""
    with open(path, "rb") as stream:
        return classify_stream(stream, catalog, exit_code)


def classify_log(lines: Iterable[str], catalog: Catalog | None = None, exit_code: int | None = None) -> Verdict:
    """Classify a log given as lines (with or without their newlines), consumed once.

    Line numbers count newlines: an item that itself contains newlines counts as several lines.
    """
    return _judge_chunks(_batches(lines), catalog, exit_code)


def _batches(lines: Iterable[str]) -> Iterator[bytes]:
    batch: list[str] = []
    size = 0
    for line in lines:
        if line.endswith("\n"):
            line = line[:-1]
        batch.append(line)
        size += len(line) + 1
        if size >= _CHUNK:
            yield ("\n".join(batch) + "\n").encode("utf-8", "replace")
            batch, size = [], 0
    if batch:
        yield ("\n".join(batch) + "\n").encode("utf-8", "replace")


# ---------------------------------------------------------------------------------------------
# A big file: the anchor scan on all CPUs

_PARALLEL_MIN = 64 << 20  # below this, starting worker processes costs more than it saves
_TASK_CHUNKS = 2  # chunks of log per task: small tasks balance the load and bound memory
_AHEAD = 2  # tasks in flight per worker: enough to keep them busy, few enough to bound memory


def _parallel_workers(stream: BinaryIO) -> int:
    """How many worker processes should scan ``stream``: 0 unless it is a buffered regular file
    with more than ``_PARALLEL_MIN`` bytes left, more than one CPU is usable, and this process
    may fork (a daemonic process may not have children; forking a process with other threads
    running could leave a child waiting forever on a lock one of them held)."""
    if not isinstance(stream, io.BufferedReader):
        return 0
    try:
        status = os.fstat(stream.fileno())
    except (OSError, ValueError):
        return 0
    if not stat.S_ISREG(status.st_mode) or status.st_size - stream.tell() <= _PARALLEL_MIN:
        return 0
    import multiprocessing  # only here: importing it costs small logs' callers ~15 ms

    if multiprocessing.current_process().daemon or threading.active_count() > 1:
        return 0
    if "fork" not in multiprocessing.get_all_start_methods():
        return 0
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _classify_in_parallel(stream: BinaryIO, patterns: PatternSet, workers: int, exit_code: int | None) -> Verdict:
    verdict = _judge(_parallel_candidates(stream.fileno(), stream.tell(), patterns, workers), patterns, exit_code)
    stream.seek(0, os.SEEK_END)  # consumed, as by the single-process reader
    return verdict


def _parallel_candidates(fd: int, base: int, patterns: PatternSet, workers: int) -> Iterator[tuple[int, bytes]]:
    """The candidate lines of the file from offset ``base`` on, numbered from 1 there, found by
    ``workers`` processes; in file order, with at most ``_AHEAD`` tasks' results per worker
    waiting in memory. A worker that dies (say, killed for memory) raises BrokenProcessPool."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    task = _TASK_CHUNKS * _CHUNK
    starts = range(base, os.fstat(fd).st_size, task)
    tasks = iter([(start, start + task) for start in starts[:-1]] + [(starts[-1], None)])  # the last reads to EOF
    context = multiprocessing.get_context("fork")  # the workers inherit fd and patterns
    with ProcessPoolExecutor(workers, context, initializer=_start_worker, initargs=(fd, base, patterns)) as pool:
        pending: collections.deque = collections.deque()
        lines_before = 0
        while True:
            while len(pending) < workers * _AHEAD and (args := next(tasks, None)) is not None:
                pending.append(pool.submit(_scan_task, *args))
            if not pending:
                return
            newlines, numbers, lines = pending.popleft().result()
            end = -1
            for number in numbers:
                start, end = end + 1, lines.index(b"\n", end + 1)
                yield lines_before + number, lines[start:end]
            lines_before += newlines


_worker: tuple = ()  # in a worker process, (fd, base, patterns): set by _start_worker


def _start_worker(fd: int, base: int, patterns: PatternSet) -> None:
    global _worker
    _worker = (fd, base, patterns)


def _scan_task(start: int, stop: int | None) -> tuple[int, array.array, bytes]:
    """Scan the lines of one task: from the first clean boundary at or after ``start`` to the
    first at or after ``stop`` (or to the end of the file). Returns the number of newlines
    scanned, and the task's candidate lines, numbered from 1, each ended by a newline."""
    fd, base, patterns = _worker
    numbers, lines = array.array("q"), bytearray()
    resumed = (start, b"") if start == base else _clean_boundary(fd, start, stop)
    if resumed is None:  # no clean boundary in this task: the task before runs on through it
        return 0, numbers, b""
    offset, carry = resumed
    scanner = _Scanner(patterns, carry)
    clean = False
    while stop is None or offset < stop or not clean:
        data = _read_chunk(fd, offset)
        found = scanner.feed(data) if data else scanner.finish()
        for number, raw in found:
            numbers.append(number)
            lines += raw
            lines += b"\n"
        if not data:
            break
        offset += len(data)
        clean = _is_clean(data)
    return scanner.line - 1, numbers, bytes(lines)  # the line carried over has no newline


def _clean_boundary(fd: int, start: int, stop: int | None) -> tuple[int, bytes] | None:
    """The first chunk boundary at or after ``start``, before ``stop``, after a clean chunk,
    with the unfinished line carried over there; None if there is none."""
    offset = start
    while stop is None or offset < stop:
        before = _read_chunk(fd, offset - _CHUNK)
        if _is_clean(before):
            return offset, before[before.rfind(b"\n") + 1 :]
        if len(before) < _CHUNK:  # the end of the file: the previous task reads to it
            return None
        offset += _CHUNK
    return None


def _is_clean(chunk: bytes) -> bool:
    """Whether the single-process reader, having read ``chunk``, carries over only the line
    after its last newline. A short chunk is the end of the file, where the reader goes on to
    its last line: no task starts there."""
    return len(chunk) == _CHUNK and b"\n" in chunk


def _read_chunk(fd: int, offset: int) -> bytes:
    """The ``_CHUNK`` bytes at ``offset``, fewer only at the end of the file (a short read
    elsewhere, however unlikely from a regular file, would shift the chunks)."""
    data = os.pread(fd, _CHUNK, offset)
    while 0 < len(data) < _CHUNK and (more := os.pread(fd, _CHUNK - len(data), offset + len(data))):
        data += more
    return data
