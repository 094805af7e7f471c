"""Outcomes: what happened to a check, and why.

The product's judgement lives in these few types. A check is either a real failure of the
thing under test (``fail``), or a broken environment (``env_fault`` with a category), or a
broken harness/spec (``error``); a known bug is expected to fail (``xfail``) and is reported
loudly when it stops failing (``xpass``); mixed results over repeats are ``flaky``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence


class Outcome(str, enum.Enum):
    PASS = "pass"
    FAIL = "fail"
    ENV_FAULT = "env_fault"
    ERROR = "error"
    SKIP = "skip"
    XFAIL = "xfail"
    XPASS = "xpass"
    FLAKY = "flaky"

    def __str__(self) -> str:
        return self.value


class EnvCategory(str, enum.Enum):
    """Stable slugs for environment faults; CI dashboards and scheduled jobs key on them."""

    DEVICE_MISSING = "device-missing"
    DRIVER_MISSING = "driver-missing"
    DRIVER_VERSION = "driver-version"
    HUGEPAGES = "hugepages"
    IOMMU = "iommu"
    SYSFS = "sysfs"
    DEVICE_BUSY = "device-busy"
    FIRMWARE = "firmware"
    ETH_LINK = "eth-link"
    DEVICE_HANG = "device-hang"
    MOUNT = "mount"
    DOCKER = "docker"
    IMAGE = "image"
    SSH = "ssh"
    NETWORK = "network"
    DISK = "disk"
    TIMEOUT = "timeout"
    SCHEDULER = "scheduler"  # the cluster scheduler (Slurm) ended the job: node failure, preemption

    def __str__(self) -> str:
        return self.value


class HarnessErrorKind(str, enum.Enum):
    """Why an ``error`` outcome happened: the harness or the job spec is broken, not the card."""

    SPEC = "spec"  # the job spec asked for something that cannot work
    ARTIFACT = "artifact"  # an expected artifact (gtest XML, IR file) is missing or unreadable
    INTERNAL = "internal"  # a bug in the harness itself

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Evidence:
    """One deciding line: where it was, what it said, which signature matched (if any)."""

    line: int | None
    text: str
    signature: str | None = None

    def to_json(self) -> dict:
        return {"line": self.line, "text": self.text, "signature": self.signature}


@dataclass(frozen=True)
class Verdict:
    """The judgement on one run of one test: outcome, category and the evidence for it.

    ``category`` is an :class:`EnvCategory` for ``env_fault`` and a :class:`HarnessErrorKind`
    for ``error``; it is ``None`` for every other outcome.
    """

    outcome: Outcome
    category: EnvCategory | HarnessErrorKind | None = None
    message: str = ""
    evidence: tuple[Evidence, ...] = ()

    def __post_init__(self) -> None:
        if self.outcome is Outcome.ENV_FAULT and not isinstance(self.category, EnvCategory):
            raise ValueError("an env_fault verdict needs an EnvCategory")
        if self.outcome is Outcome.ERROR and not isinstance(self.category, HarnessErrorKind):
            raise ValueError("an error verdict needs a HarnessErrorKind")
        if self.outcome not in (Outcome.ENV_FAULT, Outcome.ERROR) and self.category is not None:
            raise ValueError(f"a {self.outcome} verdict carries no category")

    @classmethod
    def env_fault(cls, category: EnvCategory, message: str, evidence: Iterable[Evidence] = ()) -> "Verdict":
        return cls(Outcome.ENV_FAULT, category, message, tuple(evidence))

    @classmethod
    def error(cls, kind: HarnessErrorKind, message: str, evidence: Iterable[Evidence] = ()) -> "Verdict":
        return cls(Outcome.ERROR, kind, message, tuple(evidence))


@dataclass(frozen=True)
class KnownBug:
    """A check that is expected to fail until a bug is fixed (``expect: fail`` in a spec)."""

    reason: str
    link: str | None = None

    def describe(self) -> str:
        return f"known bug: {self.reason}" + (f" ({self.link})" if self.link else "")


@dataclass(frozen=True)
class Attempt:
    """One run of one test case; a check with ``repeat: N`` has N attempts per test case."""

    verdict: Verdict
    duration: float = 0.0
    output: str = ""


@dataclass(frozen=True)
class CaseResult:
    """One test case as reported: the combined verdict over its attempts."""

    name: str
    classname: str
    verdict: Verdict
    attempts: tuple[Attempt, ...] = ()
    duration: float = 0.0
    output: str = ""
    known_bug: KnownBug | None = None
    check: str | None = None  # the job's check this case came from (a check may report many cases)

    @property
    def outcome(self) -> Outcome:
        return self.verdict.outcome


@dataclass(frozen=True)
class SuiteResult:
    """All cases of one job on one host: becomes one JUnit ``<testsuite>``."""

    job: str
    host: str
    cases: tuple[CaseResult, ...]
    properties: Mapping[str, str] = field(default_factory=dict)
    timestamp: str | None = None  # ISO 8601, UTC
    duration: float = 0.0

    @property
    def name(self) -> str:
        return f"{self.job}@{self.host}"


# ---------------------------------------------------------------------------------------------
# Combining attempts and expectations


def combine_attempts(verdicts: Iterable[Verdict]) -> Verdict:
    """The verdict of a test case over its repeats, before any known-bug expectation.

    - pass and fail both seen: ``flaky`` (the failed attempts stay in the report);
    - fail without any pass: ``fail`` (a real failure outranks a broken environment);
    - otherwise an ``error``, then an ``env_fault``, wins over passes: a run whose
      environment broke once is not a run to trust;
    - all skipped: ``skip``.
    """
    verdicts = list(verdicts)
    if not verdicts:
        raise ValueError("no attempts to combine")
    by_outcome: dict[Outcome, Verdict] = {}
    for verdict in verdicts:
        by_outcome.setdefault(verdict.outcome, verdict)
    if Outcome.FAIL in by_outcome and Outcome.PASS in by_outcome:
        failed = sum(v.outcome is Outcome.FAIL for v in verdicts)
        return Verdict(Outcome.FLAKY, message=f"failed {failed} of {len(verdicts)} attempts")
    for outcome in (Outcome.FAIL, Outcome.ERROR, Outcome.ENV_FAULT, Outcome.PASS, Outcome.SKIP):
        if outcome in by_outcome:
            return by_outcome[outcome]
    # XFAIL/XPASS/FLAKY are results of combination, never of a single raw attempt.
    raise ValueError(f"unexpected attempt outcomes: {sorted(by_outcome)}")


def apply_expectation(verdict: Verdict, known_bug: KnownBug | None) -> Verdict:
    """Turn a raw verdict into xfail/xpass for a check that is expected to fail."""
    if known_bug is None:
        return verdict
    if verdict.outcome is Outcome.FAIL:
        return Verdict(Outcome.XFAIL, message=known_bug.describe(), evidence=verdict.evidence)
    if verdict.outcome is Outcome.PASS:
        return Verdict(
            Outcome.XPASS,
            message=f"passed but expected to fail: {known_bug.describe()}; close the bug and drop `expect: fail`",
        )
    return verdict  # env faults, errors, skips and flakes say nothing about the bug


def combine_cases(
    check: str, known_bug: KnownBug | None, attempts: Mapping[tuple[str, str], Sequence[Attempt]]
) -> list[CaseResult]:
    """The cases of one check from each test case's attempts (keyed by classname and name, in
    the order to report them): combined over repeats, then held to the check's expectation.
    Every executor combines this way (a runner's repeats, a Slurm job array's elements)."""
    return [
        CaseResult(
            name=name,
            classname=classname,
            verdict=apply_expectation(combine_attempts(a.verdict for a in tries), known_bug),
            attempts=tuple(tries),
            duration=sum(a.duration for a in tries),
            output=tries[-1].output,
            known_bug=known_bug,
            check=check,
        )
        for (classname, name), tries in attempts.items()
    ]


# ---------------------------------------------------------------------------------------------
# Exit codes, shared by every command that runs or judges checks

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_ENV_FAULT = 3
# `harness run` only: another live run of the same job holds the output folder's run lock, so
# nothing ran (not 1 or 3: no test said anything; a scheduler can tell "try later" apart).
EXIT_LOCKED = 4

_FAILING = frozenset({Outcome.FAIL, Outcome.XPASS, Outcome.ERROR})


def exit_code(outcomes: Iterable[Outcome]) -> int:
    """0 all passed (xfail, flaky and skip count as passed); 1 a real failure, an xpass or a
    harness error; 3 no such failure but at least one environment fault."""
    seen = set(outcomes)
    if seen & _FAILING:
        return EXIT_FAILURE
    if Outcome.ENV_FAULT in seen:
        return EXIT_ENV_FAULT
    return EXIT_OK


def summarize(outcomes: Iterable[Outcome]) -> Mapping[str, int]:
    """Counts per outcome, every outcome present (zero where none), in declaration order."""
    counts = {outcome.value: 0 for outcome in Outcome}
    for outcome in outcomes:
        counts[outcome.value] += 1
    return counts
