"""The classifier measured on a labelled corpus of realistic logs (tests/data/corpus, issue 10).

Each case in ``cases.yaml`` is labelled with the truth a kernel engineer would conclude (pass, a
real failure, or an environment fault of a category), independently of what the classifier says.
This module checks the corpus itself, then classifies every log and compares:

- the costliest mistake is calling a real failure ``pass`` or ``env_fault``: one hard test lists
  every such offender;
- one test per case checks outcome, category and (where labelled) a phrase of the message;
  a held-out case the classifier is known to get wrong carries ``known_miss`` and is a strict
  xfail, unless the miss is the costly one, which stays a hard failure;
- one test prints the accuracy per class and per set (run with ``-s`` to see it) and checks that
  every log got a verdict at all: a harness bug is never a crash.

Cases belong to a set: ``tuning`` (the default: the logs the classifier and its catalogs were
tuned on, so their accuracy is training accuracy) or ``heldout`` (written afterwards, never tuned
on: the honest figure).
"""

from __future__ import annotations

import collections
import functools
import inspect
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from harness.core.classifier import classify_file
from harness.core.outcomes import EnvCategory, Outcome, Verdict

CORPUS = Path(__file__).parent / "data" / "corpus"
CASES_FILE = CORPUS / "cases.yaml"
CLASSES = ("tools", "waits", "sysfs", "cause", "summaries", "lookalikes", "baseline")
LABEL_OUTCOMES = (Outcome.PASS, Outcome.FAIL, Outcome.ENV_FAULT)
SETS = ("tuning", "heldout")
KEYS = {"file", "class", "set", "outcome", "category", "exit_code", "message_contains", "known_miss", "sources", "note"}
MAX_LOG_BYTES = 20_000


@dataclass(frozen=True)
class Case:
    file: str
    klass: str
    outcome: Outcome
    category: EnvCategory | None
    exit_code: int | None
    message_contains: str | None
    set: str = "tuning"
    known_miss: str | None = None

    @property
    def id(self) -> str:
        return self.file if self.exit_code is None else f"{self.file}[exit={self.exit_code}]"


def _problems(raw: object) -> tuple[list[Case], list[str]]:
    """The cases of ``cases.yaml`` and every problem with it (each one line naming the entry)."""
    problems: list[str] = []
    if not isinstance(raw, dict) or not isinstance(raw.get("cases"), list):
        return [], [f"{CASES_FILE}: expected a mapping with a 'cases' list"]
    cases: list[Case] = []
    for index, entry in enumerate(raw["cases"]):
        where = f"{CASES_FILE.name} case {index}"
        if not isinstance(entry, dict):
            problems.append(f"{where}: not a mapping")
            continue
        where = f"{CASES_FILE.name} case {index} ({entry.get('file')})"
        if unknown := set(entry) - KEYS:
            problems.append(f"{where}: unknown keys {sorted(unknown)}")
        file = entry.get("file")
        if not isinstance(file, str) or not file.endswith(".log"):
            problems.append(f"{where}: 'file' must be a .log path relative to {CORPUS}")
            continue
        path = CORPUS / file
        if not path.is_file():
            problems.append(f"{where}: {path} does not exist")
        elif path.stat().st_size > MAX_LOG_BYTES:
            problems.append(f"{where}: {path} is larger than {MAX_LOG_BYTES} bytes")
        klass = entry.get("class")
        if klass not in CLASSES:
            problems.append(f"{where}: class {klass!r} is not one of {CLASSES}")
        elif file.split("/")[0] != klass:
            problems.append(f"{where}: a {klass} case must live in {klass}/")
        try:
            outcome = Outcome(entry.get("outcome"))
        except ValueError:
            outcome = None
        if outcome not in LABEL_OUTCOMES:
            problems.append(f"{where}: outcome {entry.get('outcome')!r} is not one of pass, fail, env_fault")
            continue
        category = None
        if outcome is Outcome.ENV_FAULT:
            try:
                category = EnvCategory(entry.get("category"))
            except ValueError:
                problems.append(f"{where}: category {entry.get('category')!r} is not an EnvCategory")
        elif "category" in entry:
            problems.append(f"{where}: only an env_fault case has a category")
        exit_code = entry.get("exit_code")
        if exit_code is not None and (type(exit_code) is not int or not 0 <= exit_code <= 255):
            problems.append(f"{where}: exit_code must be an integer 0..255")
        message = entry.get("message_contains")
        if message is not None and (not isinstance(message, str) or not message):
            problems.append(f"{where}: message_contains must be a non-empty string")
        case_set = entry.get("set", "tuning")
        if case_set not in SETS:
            problems.append(f"{where}: set {case_set!r} is not one of {SETS}")
        known_miss = entry.get("known_miss")
        if known_miss is not None and (not isinstance(known_miss, str) or not known_miss.strip()):
            problems.append(f"{where}: known_miss must say why the classifier gets this case wrong")
        elif known_miss is not None and case_set != "heldout":
            problems.append(f"{where}: only a heldout case may carry known_miss (tuning cases must pass)")
        sources = entry.get("sources")
        if not isinstance(sources, list) or not sources or not all(isinstance(s, str) and s for s in sources):
            problems.append(f"{where}: sources must be a non-empty list of strings")
        if not isinstance(entry.get("note"), str) or not entry["note"].strip():
            problems.append(f"{where}: note must say why the label is the truth")
        cases.append(Case(file, klass, outcome, category, exit_code, message, case_set, known_miss))
    ids = collections.Counter(case.id for case in cases)
    problems += [f"{CASES_FILE.name}: case {case_id} is listed {n} times" for case_id, n in ids.items() if n > 1]
    referenced = {case.file for case in cases}
    for path in sorted(CORPUS.rglob("*.log")):
        relative = path.relative_to(CORPUS).as_posix()
        if relative not in referenced:
            problems.append(f"{relative}: not referenced by {CASES_FILE.name}")
    return cases, problems


@functools.lru_cache(maxsize=1)
def _load() -> tuple[tuple[Case, ...], tuple[str, ...]]:
    with open(CASES_FILE, encoding="utf-8") as stream:
        raw = yaml.safe_load(stream)
    cases, problems = _problems(raw)
    return tuple(cases), tuple(problems)


def _takes_exit_code() -> bool:
    # ``exit_code`` is being added to classify_file; until it lands, cases labelled with an
    # exit code are classified from the log alone (and may then fail, which is the point).
    return "exit_code" in inspect.signature(classify_file).parameters


@functools.lru_cache(maxsize=None)
def _verdict(case: Case) -> Verdict | BaseException:
    """The classifier's verdict on one case, or the exception it raised (a harness bug)."""
    path = CORPUS / case.file
    try:
        if case.exit_code is not None and _takes_exit_code():
            return classify_file(path, exit_code=case.exit_code)
        return classify_file(path)
    except Exception as error:  # noqa: BLE001 - recorded and reported as the case's failure
        return error


def _describe(verdict: Verdict | BaseException) -> str:
    if isinstance(verdict, BaseException):
        return f"raised {type(verdict).__name__}: {verdict}"
    label = f"{verdict.outcome}/{verdict.category}" if verdict.category else str(verdict.outcome)
    return f"{label} ({verdict.message[:160]})"


def _costly(case: Case, verdict: Verdict | BaseException) -> bool:
    """A real failure hidden as a pass or blamed on the environment (or a crash on one)."""
    if case.outcome is not Outcome.FAIL:
        return False
    return isinstance(verdict, BaseException) or verdict.outcome in (Outcome.PASS, Outcome.ENV_FAULT)


def _mismatch(case: Case, verdict: Verdict | BaseException) -> str | None:
    """Why the verdict does not match the label, or None if it does."""
    if isinstance(verdict, BaseException):
        return _describe(verdict)
    if verdict.outcome is not case.outcome:
        return f"outcome {verdict.outcome}, expected {case.outcome}"
    if case.category is not None and verdict.category is not case.category:
        return f"category {verdict.category}, expected {case.category}"
    if case.message_contains is not None and case.message_contains not in verdict.message:
        return f"message {verdict.message!r} lacks {case.message_contains!r}"
    return None


CASES, PROBLEMS = _load()


# ---------------------------------------------------------------------------------------------
# The corpus itself


def test_corpus_is_well_formed():
    assert not PROBLEMS, "\n".join(PROBLEMS)


def test_corpus_size_and_classes():
    per_class = collections.Counter(case.klass for case in CASES)
    assert len(CASES) >= 60, f"only {len(CASES)} cases"
    assert all(per_class[klass] >= 8 for klass in CLASSES), dict(per_class)
    # every class of truth is represented where the issue asks for it
    outcomes = {(case.klass, case.outcome) for case in CASES}
    for needed in [
        ("waits", Outcome.PASS),
        ("waits", Outcome.ENV_FAULT),
        ("summaries", Outcome.PASS),
        ("summaries", Outcome.FAIL),
        ("baseline", Outcome.PASS),
        ("baseline", Outcome.FAIL),
        ("baseline", Outcome.ENV_FAULT),
    ]:
        assert needed in outcomes, needed
    held_out = collections.Counter(case.klass for case in CASES if case.set == "heldout")
    assert all(held_out[klass] >= 3 for klass in CLASSES), dict(held_out)
    assert all(case.outcome is Outcome.FAIL for case in CASES if case.klass == "lookalikes")
    assert all(case.category is EnvCategory.SYSFS for case in CASES if case.klass == "sysfs")
    assert any(case.message_contains == "no verdict" and case.exit_code is None for case in CASES)
    assert {case.exit_code == 0 for case in CASES if case.exit_code is not None} == {True, False}


# ---------------------------------------------------------------------------------------------
# The classifier against the labels


def test_no_real_failure_is_called_pass_or_env_fault():
    """The costliest mistakes: a real failure hidden as a pass or blamed on the environment."""
    offenders = []
    for case in CASES:  # every set: known_miss never excuses this mistake
        verdict = _verdict(case)
        if _costly(case, verdict):
            offenders.append(f"{case.id} [{case.set}]: {_describe(verdict)}")
    assert not offenders, f"{len(offenders)} real failure(s) misjudged:\n" + "\n".join(offenders)


def _param(case: Case):
    # A known miss is a strict xfail (it fails loudly once fixed, so the label gets dropped), but
    # never for the costly mistake: that one stays a hard failure whatever the case says.
    if case.known_miss is None or _costly(case, _verdict(case)):
        return pytest.param(case, id=case.id)
    return pytest.param(case, id=case.id, marks=pytest.mark.xfail(strict=True, reason=case.known_miss))


def test_known_misses_are_not_costly():
    excused = [case.id for case in CASES if case.known_miss is not None and _costly(case, _verdict(case))]
    assert not excused, f"known_miss cannot excuse a real failure called pass/env_fault: {excused}"


@pytest.mark.parametrize("case", [_param(case) for case in CASES])
def test_case(case: Case):
    verdict = _verdict(case)
    problem = _mismatch(case, verdict)
    assert problem is None, f"{case.id} ({case.klass}): {problem}; verdict: {_describe(verdict)}"


def test_accuracy_per_class():
    """Prints accuracy per class and per set (``pytest -s``). Fails only if the classifier crashed
    on a log or returned something other than pass, fail or env_fault: a verdict is always given."""
    right: collections.Counter = collections.Counter()  # keyed by (class, set)
    total: collections.Counter = collections.Counter()
    crashed, odd, wrong = [], [], []
    for case in CASES:
        verdict = _verdict(case)
        total[case.klass, case.set] += 1
        if isinstance(verdict, BaseException):
            crashed.append(f"{case.id}: {_describe(verdict)}")
        elif verdict.outcome not in LABEL_OUTCOMES:
            odd.append(f"{case.id}: {_describe(verdict)}")
        if (problem := _mismatch(case, verdict)) is None:
            right[case.klass, case.set] += 1
        else:
            why = f" (known miss: {case.known_miss})" if case.known_miss else ""
            wrong.append(f"  [{case.set}] {case.id}: {problem}{why}")

    def cell(klasses, sets) -> str:
        r = sum(right[k, s] for k in klasses for s in sets)
        t = sum(total[k, s] for k in klasses for s in sets)
        return f"{r:>3}/{t:<3} {100 * r / t:5.1f}%" if t else f"{'-':>7} {'':>6}"

    columns = [(name, (name,)) for name in SETS] + [("all", SETS)]
    lines = ["", f"corpus accuracy ({len(CASES)} cases; exit codes passed: {_takes_exit_code()})"]
    lines.append(f"  {'class':<11} " + " ".join(f"{name:<14}" for name, _ in columns))
    for klass in CLASSES:
        lines.append(f"  {klass:<11} " + " ".join(f"{cell((klass,), sets):<14}" for _, sets in columns))
    lines.append(f"  {'all':<11} " + " ".join(f"{cell(CLASSES, sets):<14}" for _, sets in columns))
    lines += ["mismatches:", *wrong] if wrong else []
    print("\n".join(lines))
    assert not crashed, "classifier raised on:\n" + "\n".join(crashed)
    assert not odd, "verdicts outside pass/fail/env_fault:\n" + "\n".join(odd)
