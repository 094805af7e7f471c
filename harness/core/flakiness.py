"""What a run history says: pass rates per check, env-fault rates per host, and for a check that
both passes and fails, what its failures follow.

Pure: it reads :class:`~harness.core.records.RunInfo` and :class:`~harness.core.records.CaseRecord`
values (from the history database or anywhere else) and returns plain data; no I/O.

The unit is an *execution*: one check on one host in one run (a check may report many test
cases; the execution's status is the worst of them, a real failure outranking an environment
fault, as :func:`~harness.core.outcomes.combine_attempts` ranks them).

Attribution of a check that both passes and fails over the window, in this order:

1. **the host**: most of its reds are environment faults (the card, the driver, the mounts,
   never the code), or its real failures sit on one host while the other hosts pass;
2. **a regression**: its outcome follows the tt-metal ref (else the image digest): every ref up
   to some ref passed, every execution on that ref and every later one failed, on whichever host.
   The first failing ref is named;
3. **the test or the code**: failures spread over hosts that also pass, on the same ref, without
   environment faults: the test is flaky (the seed's NIGHTLY test on random data) or the code is
   nondeterministic. Rerunning on another host will not help.

Each answer carries its evidence: counts per host and per ref, and the red executions.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from harness.core.outcomes import Outcome
from harness.core.records import CaseRecord, RunInfo

# An execution's status, worst first: a real failure outranks a broken environment.
FAIL, ENV_FAULT, ERROR, FLAKY, PASS, SKIP = "fail", "env_fault", "error", "flaky", "pass", "skip"
_RANK = {FAIL: 0, ENV_FAULT: 1, ERROR: 2, FLAKY: 3, PASS: 4, SKIP: 5}
_STATUS = {
    Outcome.FAIL: FAIL, Outcome.XPASS: FAIL, Outcome.ENV_FAULT: ENV_FAULT, Outcome.ERROR: ERROR,
    Outcome.FLAKY: FLAKY, Outcome.PASS: PASS, Outcome.XFAIL: PASS, Outcome.SKIP: SKIP,
}
RED = frozenset({FAIL, FLAKY, ENV_FAULT})  # a "failure" for attribution: the check did not just pass
REAL = frozenset({FAIL, FLAKY})  # the thing under test failed (at least once, for flaky)

# Thresholds of the attribution, as data so the report can say them.
HOST_SHARE = 0.8  # a host holds at least this share of a check's red executions ...
OTHERS_MAX_RED = 0.2  # ... while the other hosts fail at most this often
REGRESSION_MIN_FAILURES = 3  # executions failing from the first bad ref on, before it is called one
WORSE_BY = 0.15  # a host's env-fault rate rose at least this much from the older half to the newer
EVIDENCE_LINES = 8


@dataclass(frozen=True)
class Execution:
    """One check on one host in one run."""

    run_id: str
    order: int  # 0 for the oldest run of the window
    started: str
    check: str
    host: str
    status: str
    categories: tuple[str, ...] = ()  # env-fault categories (or error kinds) of its cases
    failed_cases: tuple[str, ...] = ()
    ref: str = ""
    image_digest: str = ""
    board: str = ""

    @property
    def label(self) -> str:
        what = self.status + (f"/{','.join(self.categories)}" if self.categories else "")
        where = f" ref {self.ref}" if self.ref else (f" image {_short(self.image_digest)}" if self.image_digest else "")
        cases = f" ({', '.join(self.failed_cases[:3])}{', ...' if len(self.failed_cases) > 3 else ''})" if self.failed_cases else ""
        return f"run {self.run_id} ({self.started}) on {self.host}{where}: {what}{cases}"


@dataclass(frozen=True)
class Red:
    """One red execution of a check: a real failure or an environment fault, and where."""

    run_id: str
    host: str
    kind: str  # "real failure" | "env fault" | "harness error"
    status: str
    categories: tuple[str, ...]
    ref: str


@dataclass(frozen=True)
class CheckStats:
    check: str
    runs: int
    executions: int
    passed: int
    failed: int  # real failures (fail, xpass)
    env_faults: int
    errors: int
    skipped: int
    flaky: int
    reds: tuple[Red, ...] = ()

    @property
    def pass_rate(self) -> float | None:
        """Passed (flaky counts as passed, as the exit code counts it) over what ran."""
        ran = self.executions - self.skipped
        return (self.passed + self.flaky) / ran if ran else None


@dataclass(frozen=True)
class HostStats:
    host: str
    executions: int
    env_faults: int
    categories: tuple[tuple[str, int], ...]  # env-fault category and count, most frequent first
    older_rate: float | None  # env-fault rate in the older half of the window
    newer_rate: float | None  # ... and in the newer half

    @property
    def env_fault_rate(self) -> float | None:
        ran = self.executions
        return self.env_faults / ran if ran else None

    @property
    def worse(self) -> bool:
        """Getting worse: the newer half's env-fault rate is clearly above the older half's."""
        return self.older_rate is not None and self.newer_rate is not None and self.newer_rate - self.older_rate >= WORSE_BY


@dataclass(frozen=True)
class Attribution:
    check: str
    cause: str  # "host" | "regression" | "test"
    subject: str  # the host, the first failing ref (or image), or the check itself
    summary: str
    evidence: tuple[str, ...] = ()


@dataclass(frozen=True)
class HistoryReport:
    runs: int
    first: str  # the oldest run's start in the window ("" when empty)
    last: str
    checks: tuple[CheckStats, ...]
    hosts: tuple[HostStats, ...]
    attributions: tuple[Attribution, ...] = field(default=())

    def to_json(self) -> dict:
        return {
            "runs": self.runs,
            "oldest": self.first,  # the oldest and newest run's start in the window
            "newest": self.last,
            "checks": [
                {
                    "check": c.check, "runs": c.runs, "executions": c.executions, "pass_rate": _round(c.pass_rate),
                    "passed": c.passed, "failed": c.failed, "env_faults": c.env_faults, "errors": c.errors,
                    "skipped": c.skipped, "flaky": c.flaky,
                    "reds": [
                        {"run_id": r.run_id, "host": r.host, "kind": r.kind, "outcome": r.status,
                         "categories": list(r.categories), "ref": r.ref}
                        for r in c.reds
                    ],
                }
                for c in self.checks
            ],
            "hosts": [
                {
                    "host": h.host, "executions": h.executions, "env_faults": h.env_faults,
                    "env_fault_rate": _round(h.env_fault_rate), "categories": dict(h.categories),
                    "older_rate": _round(h.older_rate), "newer_rate": _round(h.newer_rate), "worse": h.worse,
                }
                for h in self.hosts
            ],
            "flaky": [
                {"check": a.check, "cause": a.cause, "subject": a.subject, "summary": a.summary, "evidence": list(a.evidence)}
                for a in self.attributions
            ],
        }


# -- building the picture -------------------------------------------------------------------------


def executions(runs: Sequence[RunInfo], cases: Iterable[CaseRecord]) -> list[Execution]:
    """Group case records into executions; ``runs`` newest first (as the history returns them)
    gives each its order. Cases of runs not in ``runs`` are ignored."""
    position = {run.run_id: len(runs) - 1 - i for i, run in enumerate(runs)}
    started = {run.run_id: run.started for run in runs}
    run_refs = {run.run_id: (run.ref, run.image_digest) for run in runs}
    groups: dict[tuple[str, str, str], list[CaseRecord]] = defaultdict(list)
    for case in cases:
        if case.run_id in position:
            groups[(case.run_id, case.host, case.check)].append(case)
    found = []
    for (run_id, host, check), members in groups.items():
        statuses = [_STATUS[m.outcome] for m in members]  # Outcome is a str enum: "pass" finds PASS too
        status = min(statuses, key=_RANK.__getitem__)
        categories = tuple(sorted({m.category for m, s in zip(members, statuses) if s == status and m.category}))
        failed = tuple(m.case for m, s in zip(members, statuses) if s in RED | {ERROR})
        ref = next((m.ref for m in members if m.ref), run_refs[run_id][0])
        digest = next((m.image_digest for m in members if m.image_digest), run_refs[run_id][1])
        board = next((m.board for m in members if m.board), "")
        found.append(Execution(run_id, position[run_id], started[run_id], check, host, status, categories, failed, ref, digest, board))
    found.sort(key=lambda e: (e.order, e.host, e.check))
    return found


def analyze(runs: Sequence[RunInfo], cases: Iterable[CaseRecord], *, check: str | None = None, host: str | None = None) -> HistoryReport:
    """The history's answer over ``runs`` (newest first): per check, per host, and attribution
    of every check that both passed and failed. ``check``/``host`` narrow the executions."""
    found = [
        e for e in executions(runs, cases)
        if (check is None or e.check == check) and (host is None or e.host == host)
    ]
    by_check: dict[str, list[Execution]] = defaultdict(list)
    by_host: dict[str, list[Execution]] = defaultdict(list)
    for e in found:
        by_check[e.check].append(e)
        by_host[e.host].append(e)
    checks = tuple(_check_stats(name, group) for name, group in sorted(by_check.items()))
    hosts = tuple(_host_stats(name, group, len(runs)) for name, group in sorted(by_host.items()))
    attributions = tuple(a for name, group in sorted(by_check.items()) if (a := attribute(name, group)) is not None)
    ordered = sorted(runs, key=lambda r: r.started)
    return HistoryReport(len(runs), ordered[0].started if ordered else "", ordered[-1].started if ordered else "", checks, hosts, attributions)


def _check_stats(name: str, group: Sequence[Execution]) -> CheckStats:
    counts = Counter(e.status for e in group)
    kinds = {FAIL: "real failure", FLAKY: "real failure", ENV_FAULT: "env fault", ERROR: "harness error"}
    reds = tuple(
        Red(e.run_id, e.host, kinds[e.status], e.status, e.categories, e.ref)
        for e in sorted(group, key=lambda e: (-e.order, e.host))
        if e.status in kinds and e.status != FLAKY
    )
    return CheckStats(
        name, len({e.run_id for e in group}), len(group), counts[PASS], counts[FAIL], counts[ENV_FAULT], counts[ERROR],
        counts[SKIP], counts[FLAKY], reds,
    )


def _host_stats(name: str, group: Sequence[Execution], window: int) -> HostStats:
    env = [e for e in group if e.status == ENV_FAULT]
    categories = Counter(c for e in env for c in (e.categories or ("unknown",)))
    # Halves by the run's place in the window, so a host that ran only lately is not "worse".
    middle = window / 2
    older = [e for e in group if e.order < middle]
    newer = [e for e in group if e.order >= middle]
    return HostStats(
        name, len(group), len(env), tuple(sorted(categories.items(), key=lambda kv: (-kv[1], kv[0]))),
        _rate(older), _rate(newer),
    )


def _rate(group: Sequence[Execution]) -> float | None:
    return sum(e.status == ENV_FAULT for e in group) / len(group) if group else None


# -- attribution ----------------------------------------------------------------------------------


def attribute(check: str, group: Sequence[Execution]) -> Attribution | None:
    """What the failures of a check that both passed and failed follow; None when it did not
    both pass and fail in ``group``."""
    greens = [e for e in group if e.status == PASS]
    reds = [e for e in group if e.status in RED]
    if not greens or not reds:
        return None
    return _by_env_faults(check, group, reds) or _by_regression(check, group) or _by_host(check, group, reds) or _by_test(check, group, reds)


def _by_env_faults(check: str, group: Sequence[Execution], reds: Sequence[Execution]) -> Attribution | None:
    env = [e for e in reds if e.status == ENV_FAULT]
    if not env or len(env) * 2 < len(reds):
        return None
    per_host = Counter(e.host for e in env)
    categories = Counter(c for e in env for c in e.categories)
    spread = ", ".join(f"{h} {n}" for h, n in per_host.most_common())
    summary = (
        f"follows the host: {len(env)} of {len(reds)} failures are environment faults "
        f"({_counts(categories)}), on {spread}; the code passed where the environment held"
    )
    # The subject names every host that broke, most faults first: a lab-wide outage is not one host's.
    subject = ",".join(h for h, _ in per_host.most_common())
    return Attribution(check, "host", subject, summary, _evidence(group, reds))


def _by_regression(check: str, group: Sequence[Execution]) -> Attribution | None:
    """Every key (ref, else image) up to the first failing one passed; it and every later key
    failed. Needs at least two keys and REGRESSION_MIN_FAILURES failing executions."""
    relevant = [e for e in group if e.status in REAL or e.status == PASS]
    for what, key in (("ref", lambda e: e.ref), ("image", lambda e: e.image_digest)):
        if any(not key(e) for e in relevant):
            continue
        first_seen: dict[str, int] = {}
        status: dict[str, set[str]] = defaultdict(set)
        for e in sorted(relevant, key=lambda e: e.order):
            first_seen.setdefault(key(e), e.order)
            status[key(e)].add("red" if e.status in REAL else "green")
        keys = sorted(first_seen, key=first_seen.__getitem__)
        if len(keys) < 2 or any(len(s) > 1 for s in status.values()):
            continue  # one key, or a key that both passed and failed: the outcome does not follow it
        reds = [k for k in keys if status[k] == {"red"}]
        if not reds or keys[0] in reds:
            continue
        start = keys.index(reds[0])
        if any(status[k] != {"red"} for k in keys[start:]):
            continue  # failures that come and go with keys are not a regression
        failing = [e for e in relevant if key(e) in set(keys[start:])]
        if len(failing) < REGRESSION_MIN_FAILURES:
            continue  # a flaky test that failed in the last run or two is no regression yet
        passing = [e for e in relevant if key(e) in set(keys[:start])]
        first = min(failing, key=lambda e: e.order)
        name = reds[0] if what == "ref" else _short(reds[0])
        hosts = sorted({e.host for e in failing})
        summary = (
            f"follows the {what}: a regression starting at {what} {name} (first failed in run {first.run_id}, "
            f"{first.started}); {len(passing)} executions on {len(keys[:start])} earlier {what}(s) all passed, "
            f"{len(failing)} on {what} {name} and later all failed, on {len(hosts)} host(s): {', '.join(hosts)}"
        )
        evidence = [f"{what} {k if what == 'ref' else _short(k)}: {'fail' if status[k] == {'red'} else 'pass'} "
                    f"x{sum(key(e) == k for e in relevant)}" for k in keys]
        return Attribution(check, "regression", reds[0], summary, tuple(evidence[-EVIDENCE_LINES:]) + _evidence(group, failing)[:3])
    return None


def _by_host(check: str, group: Sequence[Execution], reds: Sequence[Execution]) -> Attribution | None:
    per_host = Counter(e.host for e in reds)
    host, count = per_host.most_common(1)[0]
    if count < 2 or count < HOST_SHARE * len(reds):
        return None
    counted = [e for e in group if e.status in RED or e.status == PASS]
    others = [e for e in counted if e.host != host]
    if not others:
        return None  # one host: nothing to compare it with
    other_red = sum(e.status in RED for e in others) / len(others)
    mine = [e for e in counted if e.host == host]
    if other_red > OTHERS_MAX_RED:
        return None
    summary = (
        f"follows the host: {count} of {len(reds)} failures on {host} (it failed {count} of {len(mine)} there), "
        f"while the other hosts failed {sum(e.status in RED for e in others)} of {len(others)}; "
        "look at that host's card, firmware and mounts"
    )
    return Attribution(check, "host", host, summary, _host_lines(counted) + _evidence(group, reds))


def _by_test(check: str, group: Sequence[Execution], reds: Sequence[Execution]) -> Attribution:
    counted = [e for e in group if e.status in RED or e.status == PASS]
    real = [e for e in reds if e.status in REAL]
    env = [e for e in reds if e.status == ENV_FAULT]
    hosts = sorted({e.host for e in real})
    healthy = [h for h in hosts if any(e.host == h and e.status == PASS for e in counted)]
    refs = Counter(e.ref for e in real if e.ref)
    both = sorted(r for r in refs if any(e.ref == r and e.status == PASS for e in counted))
    summary = (
        f"follows neither a host nor a ref: the test or the code: {len(real)} real failure(s) over "
        f"{len(hosts)} host(s) ({', '.join(hosts)}), {len(healthy)} of them also passing it"
        + (f", {len(env)} environment fault(s) besides" if env else ", no environment fault")
        + (f"; ref {', '.join(both[:3])} both passed and failed" if both else "")
        + "; a rerun elsewhere will not make it trustworthy"
    )
    return Attribution(check, "test", check, summary, _host_lines(counted) + _evidence(group, reds))


def _host_lines(counted: Sequence[Execution]) -> tuple[str, ...]:
    per: dict[str, Counter] = defaultdict(Counter)
    for e in counted:
        per[e.host][e.status] += 1
    return tuple(f"{host}: " + ", ".join(f"{n} {s}" for s, n in sorted(c.items(), key=lambda kv: _RANK[kv[0]])) for host, c in sorted(per.items()))


def _evidence(group: Sequence[Execution], reds: Sequence[Execution]) -> tuple[str, ...]:
    newest = sorted(reds, key=lambda e: (-e.order, e.host))[:EVIDENCE_LINES]
    return tuple(e.label for e in newest)


def _counts(counter: Counter) -> str:
    return ", ".join(f"{k} {n}" for k, n in counter.most_common()) or "no category"


def _short(digest: str) -> str:
    return digest.split(":", 1)[-1][:12] if digest else ""


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
