"""The JUnit feed: valid against the XSD CI servers read, and exact about every outcome."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
import xmlschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core import junit
from harness.core.outcomes import (
    Attempt,
    CaseResult,
    EnvCategory,
    Evidence,
    HarnessErrorKind,
    KnownBug,
    Outcome,
    SuiteResult,
    Verdict,
    apply_expectation,
    combine_attempts,
)
from tests.paths import JUNIT_XSD

SCHEMA = xmlschema.XMLSchema(JUNIT_XSD)

BUG = KnownBug("TT-1234 eth link flaps on n300", "https://github.com/tenstorrent/tt-metal/issues/1234")


def render_valid(suites, **kwargs) -> ET.Element:
    """Render, validate against junit-10.xsd, and return the parsed root."""
    data = junit.render(suites, **kwargs)
    assert data.startswith(b"<?xml version='1.0' encoding='utf-8'?>")
    SCHEMA.validate(data.decode("utf-8"))
    return ET.fromstring(data)


def suite(*cases: CaseResult, **kwargs) -> SuiteResult:
    return SuiteResult(job=kwargs.pop("job", "smoke"), host=kwargs.pop("host", "wh-01"), cases=cases, **kwargs)


def case(name: str, verdict: Verdict, **kwargs) -> CaseResult:
    return CaseResult(name=name, classname=kwargs.pop("classname", "smoke.gtest"), verdict=verdict, **kwargs)


def only_case(root: ET.Element) -> ET.Element:
    (testcase,) = root.iter("testcase")
    return testcase


def results(testcase: ET.Element) -> list[ET.Element]:
    """The result children of a testcase, output elements left out."""
    return [child for child in testcase if child.tag not in ("system-out", "system-err")]


FAIL = Verdict(
    Outcome.FAIL,
    message="DRAM bandwidth below floor",
    evidence=(Evidence(41, "Expected: >= 180 GB/s, actual 97 GB/s", "gtest-expect"), Evidence(None, "FAILED")),
)
ENV = Verdict.env_fault(
    EnvCategory.HUGEPAGES,
    "no 1G hugepages mounted",
    [Evidence(7, "mount: /dev/hugepages-1G: not found", "hugepages-mount"), Evidence(8, "aborting")],
)
ERROR = Verdict.error(HarnessErrorKind.ARTIFACT, "gtest XML missing", [Evidence(None, "no /out/gtest.xml")])


# ---------------------------------------------------------------------------------------------
# Every outcome, element by element


def test_pass_is_a_plain_testcase():
    root = render_valid([suite(case("add", Verdict(Outcome.PASS), duration=1.25))])
    testcase = only_case(root)
    assert testcase.attrib == {"name": "add", "classname": "smoke.gtest", "time": "1.250"}
    assert list(testcase) == []


def test_fail_is_a_failure_with_evidence_lines():
    testcase = only_case(render_valid([suite(case("bw", FAIL))]))
    (failure,) = results(testcase)
    assert failure.tag == "failure"
    assert failure.get("type") == "fail"
    assert failure.get("message") == (
        "DRAM bandwidth below floor; line 41: Expected: >= 180 GB/s, actual 97 GB/s [signature: gtest-expect]"
    )
    assert failure.text.splitlines() == [
        "line 41: Expected: >= 180 GB/s, actual 97 GB/s [signature: gtest-expect]",
        "FAILED",
    ]


def test_env_fault_is_an_error_typed_by_category_naming_the_deciding_evidence():
    testcase = only_case(render_valid([suite(case("bw", ENV))]))
    (error,) = results(testcase)
    assert error.tag == "error"
    assert error.get("type") == "environment/hugepages"
    assert error.get("message") == (
        "no 1G hugepages mounted; line 7: mount: /dev/hugepages-1G: not found [signature: hugepages-mount]"
    )
    assert error.text.splitlines()[1] == "line 8: aborting"


def test_harness_error_is_an_error_typed_by_kind():
    (error,) = results(only_case(render_valid([suite(case("bw", ERROR))])))
    assert (error.tag, error.get("type")) == ("error", "harness/artifact")
    assert error.get("message") == "gtest XML missing; no /out/gtest.xml"


def test_skip_is_skipped():
    (skipped,) = results(only_case(render_valid([suite(case("bw", Verdict(Outcome.SKIP, message="n150 only")))])))
    assert skipped.attrib == {"type": "skip", "message": "n150 only"}


def test_xfail_is_skipped_naming_the_known_bug():
    verdict = apply_expectation(FAIL, BUG)
    (skipped,) = results(only_case(render_valid([suite(case("eth", verdict, known_bug=BUG))])))
    assert skipped.tag == "skipped"
    assert skipped.get("type") == "xfail"
    assert skipped.get("message") == (
        "known bug: TT-1234 eth link flaps on n300 (https://github.com/tenstorrent/tt-metal/issues/1234)"
    )
    # The evidence that the bug is still there stays visible.
    assert "line 41: Expected: >= 180 GB/s" in skipped.text


def test_xpass_is_a_failure_so_the_bug_gets_closed():
    verdict = apply_expectation(Verdict(Outcome.PASS), BUG)
    (failure,) = results(only_case(render_valid([suite(case("eth", verdict, known_bug=BUG))])))
    assert failure.tag == "failure"
    assert failure.get("type") == "xpass"
    assert failure.get("message") == verdict.message


@pytest.mark.parametrize(
    "verdict",
    [Verdict(Outcome.FAIL), Verdict(Outcome.XPASS, message="\x08"), Verdict.env_fault(EnvCategory.SSH, ""),
     Verdict.error(HarnessErrorKind.SPEC, "\x00\x1b")],
    ids=str,
)
def test_a_bare_failing_verdict_still_yields_its_element(verdict):
    # junit-xml drops a <failure>/<error> with neither message nor body: a fail would read as a
    # pass. A message of control characters only is empty once cleaned.
    root = render_valid([suite(case("t", verdict))])
    (element,) = results(only_case(root))
    assert element.get("message")
    assert int(root.get("failures")) + int(root.get("errors")) == 1


def test_flaky_is_a_pass_with_one_flaky_failure_per_failed_attempt():
    pattern = [Outcome.FAIL, Outcome.PASS, Outcome.FAIL, Outcome.PASS, Outcome.FAIL]
    attempts = tuple(
        Attempt(
            Verdict(o, message=f"bad {i}", evidence=(Evidence(i, f"assert {i}"),)) if o is Outcome.FAIL else Verdict(o),
            duration=1.0,
            output=f"attempt {i} output",
        )
        for i, o in enumerate(pattern, 1)
    )
    verdict = combine_attempts(a.verdict for a in attempts)
    assert verdict.outcome is Outcome.FLAKY
    root = render_valid([suite(case("bw", verdict, attempts=attempts, output="combined"))])
    testcase = only_case(root)
    flakes = results(testcase)
    assert [f.tag for f in flakes] == ["flakyFailure"] * 3
    assert [f.get("type") for f in flakes] == ["fail"] * 3
    assert [f.get("message") for f in flakes] == [
        "attempt 1 of 5: bad 1; line 1: assert 1",
        "attempt 3 of 5: bad 3; line 3: assert 3",
        "attempt 5 of 5: bad 5; line 5: assert 5",
    ]
    for flake, number in zip(flakes, (1, 3, 5)):
        assert [child.tag for child in flake] == ["stackTrace", "system-out"]
        assert flake.find("stackTrace").text == f"line {number}: assert {number}"
        assert flake.find("system-out").text == f"attempt {number} output"
    assert testcase.find("system-out").text == "combined"
    # A flake counts as a pass (Surefire: "Flakes: N", not a failure).
    (testsuite,) = root
    assert (testsuite.get("tests"), testsuite.get("failures"), testsuite.get("errors"), testsuite.get("skipped")) == (
        "1", "0", "0", "0"
    )


def test_flaky_attempt_that_errored_is_a_flaky_error():
    attempts = (
        Attempt(Verdict(Outcome.PASS)),
        Attempt(Verdict(Outcome.FAIL, message="mismatch")),
        Attempt(Verdict.env_fault(EnvCategory.DEVICE_HANG, "device hung")),
    )
    verdict = combine_attempts(a.verdict for a in attempts)
    flakes = results(only_case(render_valid([suite(case("t", verdict, attempts=attempts))])))
    assert [(f.tag, f.get("type"), f.get("message")) for f in flakes] == [
        ("flakyFailure", "fail", "attempt 2 of 3: mismatch"),
        ("flakyError", "environment/device-hang", "attempt 3 of 3: device hung"),
    ]
    # No evidence, no output: rerunType's optional children are left out, not emitted empty.
    assert all(list(f) == [] for f in flakes)


def test_flaky_verdict_without_attempts_still_shows_the_flake():
    flakes = results(only_case(render_valid([suite(case("t", Verdict(Outcome.FLAKY, message="failed 1 of 2")))])))
    assert [(f.tag, f.get("type"), f.get("message")) for f in flakes] == [("flakyFailure", "flaky", "failed 1 of 2")]


ALL_OUTCOMES = (
    case("pass", Verdict(Outcome.PASS), duration=0.5),
    case("fail", FAIL, duration=1.5),
    case("env", ENV),
    case("error", ERROR),
    case("skip", Verdict(Outcome.SKIP, message="n150 only")),
    case("xfail", apply_expectation(FAIL, BUG), known_bug=BUG),
    case("xpass", apply_expectation(Verdict(Outcome.PASS), BUG), known_bug=BUG),
    case(
        "flaky",
        Verdict(Outcome.FLAKY, message="failed 1 of 2"),
        attempts=(Attempt(Verdict(Outcome.FAIL)), Attempt(Verdict(Outcome.PASS))),
    ),
)


def test_suite_mixing_every_outcome():
    assert {c.outcome for c in ALL_OUTCOMES} == set(Outcome)
    mixed = suite(*ALL_OUTCOMES, timestamp="2026-05-09T07:35:25Z", duration=12.5)
    root = render_valid([mixed], name="nightly")
    (testsuite,) = root
    assert testsuite.attrib == {
        "name": "smoke@wh-01",
        "hostname": "wh-01",
        "timestamp": "2026-05-09T07:35:25Z",
        "time": "12.500",
        "tests": "8",
        "failures": "2",  # fail + xpass
        "errors": "2",  # env_fault + error
        "skipped": "2",  # skip + xfail
    }
    by_name = {tc.get("name"): [(r.tag, r.get("type")) for r in results(tc)] for tc in testsuite.iter("testcase")}
    assert by_name == {
        "pass": [],
        "fail": [("failure", "fail")],
        "env": [("error", "environment/hugepages")],
        "error": [("error", "harness/artifact")],
        "skip": [("skipped", "skip")],
        "xfail": [("skipped", "xfail")],
        "xpass": [("failure", "xpass")],
        "flaky": [("flakyFailure", "fail")],
    }
    assert root.attrib == {"name": "nightly", "tests": "8", "failures": "2", "errors": "2", "time": "12.500"}


def test_suite_time_falls_back_to_its_cases_and_root_totals_add_up():
    first = suite(*ALL_OUTCOMES[:2])  # no suite duration measured: 0.5 + 1.5
    second = suite(case("env", ENV), job="perf", host="wh-02", duration=3)
    root = render_valid([first, second])
    assert [s.get("time") for s in root] == ["2.000", "3.000"]
    assert [s.get("name") for s in root] == ["smoke@wh-01", "perf@wh-02"]
    assert root.attrib == {"name": "tt-harness", "tests": "3", "failures": "1", "errors": "1", "time": "5.000"}


def test_bad_durations_render_as_valid_times():
    # junit-xml writes str(float) for suite time ("1e-07", "nan"), which SUREFIRE_TIME rejects.
    cases = [case(f"t{i}", Verdict(Outcome.PASS), duration=d) for i, d in enumerate([1e-7, float("nan"), -4.0])]
    root = render_valid([suite(*cases, duration=float("inf"))])
    assert [tc.get("time") for tc in root.iter("testcase")] == ["0.000"] * 3
    assert root[0].get("time") == "0.000"


def test_no_attributes_the_xsd_forbids():
    # junit-xml adds disabled= to every testsuite (and testsuites); junit-10.xsd has no such attribute.
    root = render_valid([suite(*ALL_OUTCOMES)])
    assert "disabled" not in root.attrib
    assert "disabled" not in root[0].attrib
    assert "skipped" not in root.attrib  # allowed on testsuite only


# ---------------------------------------------------------------------------------------------
# Never an empty report


def test_empty_suite_yields_a_synthetic_case_saying_what_failed():
    root = render_valid([suite(job="perf", host="wh-03")])
    (testsuite,) = root
    assert (testsuite.get("tests"), testsuite.get("errors"), testsuite.get("failures")) == ("1", "1", "0")
    testcase = only_case(root)
    assert (testcase.get("name"), testcase.get("classname")) == ("harness/no-results", "harness.perf")
    (error,) = results(testcase)
    assert error.tag == "error"
    assert error.get("type") == "harness/internal"
    assert error.get("message") == "job perf on host wh-03 produced no test results"


def test_no_suites_at_all_still_reports_an_error():
    root = render_valid([])
    assert root.get("errors") == "1"
    (error,) = results(only_case(root))
    assert (error.get("type"), error.get("message")) == ("harness/internal", "no job ran on any host")


def test_synthetic_case_for_a_host_that_failed_preflight():
    verdict = Verdict.env_fault(EnvCategory.SSH, "host unreachable", [Evidence(None, "Connection refused")])
    synthetic = junit.synthetic_case("preflight", verdict, job="smoke", output="ssh -v log")
    assert synthetic.classname == "harness.smoke"
    assert junit.synthetic_case("x", verdict).classname == "harness"
    assert junit.synthetic_case("x", verdict, "harness.build", job="smoke").classname == "harness.build"
    testcase = only_case(render_valid([suite(synthetic)]))
    assert testcase.attrib == {"name": "preflight", "classname": "harness.smoke", "time": "0.000"}
    (error,) = results(testcase)
    assert error.get("type") == "environment/ssh"
    assert testcase.find("system-out").text == "ssh -v log"


def test_case_without_classname_gets_the_job():
    # Buildkite requires a classname and GitLab shows it as the suite.
    testcase = only_case(render_valid([suite(case("t", Verdict(Outcome.PASS), classname=""))]))
    assert testcase.get("classname") == "smoke"


# ---------------------------------------------------------------------------------------------
# Hostile text and sizes


def test_hostile_text_is_cleaned_and_round_trips():
    hostile = "a\x00b\x1bc\x7f ]]> <tag> &amp; \U0001f600 \ud800 \ufffe end"
    evidence = (Evidence(1, hostile, hostile),)
    cases = (
        case(hostile, Verdict(Outcome.FAIL, message=hostile, evidence=evidence), classname=hostile, output=hostile),
    )
    root = render_valid([suite(*cases, job=hostile, properties={hostile: hostile}, timestamp=hostile)], name=hostile)
    cleaned = "abc\x7f ]]> <tag> &amp; \U0001f600   end"  # C0 controls, surrogates, U+FFFE removed
    testcase = only_case(root)
    assert testcase.get("name") == testcase.get("classname") == cleaned
    assert testcase.find("system-out").text == cleaned
    failure = testcase.find("failure")
    assert failure.get("message") == f"{cleaned}; line 1: {cleaned} [signature: {cleaned}]"
    assert root.get("name") == cleaned
    assert root[0].get("name") == f"{cleaned}@wh-01"
    assert root[0].get("timestamp") == cleaned
    assert root[0].find("properties/property").attrib == {"name": cleaned, "value": cleaned}


def test_newlines_and_tabs_in_messages_survive():
    message = "line one\n\tline two"
    (failure,) = results(only_case(render_valid([suite(case("t", Verdict(Outcome.FAIL, message=message)))])))
    assert failure.get("message") == message


def test_huge_output_keeps_head_and_tail_under_the_limit():
    output = "HEAD" + "x" * 5_000_000 + "\U0001f600" * 20_000 + "TAIL"
    testcase = only_case(render_valid([suite(case("t", Verdict(Outcome.PASS), output=output))]))
    text = testcase.find("system-out").text
    assert len(text.encode("utf-8")) <= junit.OUTPUT_LIMIT
    assert len(text.encode("utf-8")) > junit.OUTPUT_LIMIT - 8  # the budget is used, not wasted
    head, marker, tail = text.split("\n")
    assert marker == "--[ CUT DUE TO XML PER TEST LIMIT ]--"
    assert head.startswith("HEAD") and set(head[4:]) == {"x"}
    # The cut may split a 4-byte character: the broken half is dropped, never emitted.
    assert tail.endswith("TAIL") and set(tail[:-4]) == {"\U0001f600"}


def test_huge_evidence_message_and_attempt_output_are_bounded():
    big = "e" * 1_000_000
    attempts = (Attempt(Verdict(Outcome.FAIL, evidence=(Evidence(1, big),)), output=big), Attempt(Verdict(Outcome.PASS)))
    cases = (
        case("fail", Verdict(Outcome.FAIL, message=big, evidence=(Evidence(1, big),))),
        case("flaky", Verdict(Outcome.FLAKY), attempts=attempts),
    )
    root = render_valid([suite(*cases)])
    failure = root.find(".//failure")
    assert len(failure.get("message").encode()) <= junit.MESSAGE_LIMIT
    assert len(failure.text.encode()) <= junit.OUTPUT_LIMIT
    flake = root.find(".//flakyFailure")
    assert len(flake.find("system-out").text.encode()) <= junit.ATTEMPT_OUTPUT_LIMIT
    assert len(flake.find("stackTrace").text.encode()) <= junit.OUTPUT_LIMIT
    for text in (failure.get("message"), failure.text, flake.find("system-out").text):
        assert junit.CUT_MARKER in text


# ---------------------------------------------------------------------------------------------
# Properties


def test_properties_are_rendered_sorted_and_unknown_ones_left_out():
    properties = {
        "kmd_version": "1.29",
        "arch": "wormhole_b0",
        "board": "n300",
        "docker_run_options": "--device /dev/tenstorrent/0 -v /dev/hugepages-1G:/dev/hugepages-1G",
        "image": "ghcr.io/tenstorrent/tt-metal:latest",
        "image_digest": "sha256:0123",
        "firmware_version": None,  # not known on this host
    }
    root = render_valid([suite(case("t", Verdict(Outcome.PASS)), properties=properties)])
    rendered = [(p.get("name"), p.get("value")) for p in root.iterfind("testsuite/properties/property")]
    assert rendered == sorted((k, v) for k, v in properties.items() if v is not None)
    # The XSD has no <properties> inside a testcase (pytest's xunit1 puts them there).
    assert root.find(".//testcase/properties") is None


def test_no_properties_no_element():
    assert render_valid([suite(case("t", Verdict(Outcome.PASS)))]).find("testsuite/properties") is None


# ---------------------------------------------------------------------------------------------
# Secrets


def all_text(root: ET.Element) -> list[str]:
    """Every attribute value and text node of the document."""
    texts = []
    for element in root.iter():
        texts.extend(element.attrib.values())
        texts.extend(t for t in (element.text, element.tail) if t)
    return texts


def test_secrets_are_redacted_everywhere():
    token = "ghp_S3cr3tT0k3n"
    password = "hunter2-lab"
    leak = f"token={token} pass={password}"
    attempts = (Attempt(Verdict(Outcome.FAIL, message=leak, evidence=(Evidence(1, leak, leak),)), output=leak),
                Attempt(Verdict(Outcome.PASS)))
    cases = (
        case(leak, Verdict(Outcome.FAIL, message=leak, evidence=(Evidence(1, leak, leak),)), classname=leak, output=leak),
        case("env", Verdict.env_fault(EnvCategory.DOCKER, leak, [Evidence(2, leak)])),
        case("flaky", Verdict(Outcome.FLAKY, message=leak), attempts=attempts),
        case("xfail", apply_expectation(FAIL, KnownBug(leak, leak)), known_bug=KnownBug(leak, leak)),
    )
    properties = {"docker_run_options": f"-e TOKEN={token}", leak: leak}
    suites = [suite(*cases, job=leak, host=leak, properties=properties, timestamp=leak)]
    root = render_valid(suites, name=leak, redact=[token, password])
    texts = all_text(root)
    assert not [t for t in texts if token in t or password in t]
    assert "token=*** pass=***" in texts
    assert ("docker_run_options", "-e TOKEN=***") in [(p.get("name"), p.get("value")) for p in root.iter("property")]
    # Without redaction the same report does carry the secrets: the test above can fail.
    assert any(token in t for t in all_text(render_valid(suites)))


def test_overlapping_secrets_leave_no_fragment():
    # Masking "abc123" first would leave "xyz" of the overlapping "123xyz" behind.
    root = render_valid([suite(case("t", Verdict(Outcome.PASS), output="pre abc123xyz post"))],
                        redact=["abc123", "123xyz"])
    assert only_case(root).find("system-out").text == "pre *** post"


def test_secret_is_masked_before_the_cut():
    # A cut through the middle of a secret must not leave its first half in the head.
    secret = "S" * 40
    keep = (junit.OUTPUT_LIMIT - len(f"\n{junit.CUT_MARKER}\n")) // 2
    output = "a" * (keep - 20) + secret + "b" * junit.OUTPUT_LIMIT
    text = only_case(render_valid([suite(case("t", Verdict(Outcome.PASS), output=output))], redact=[secret])).find(
        "system-out"
    ).text
    assert "SS" not in text
    assert text.startswith("a" * (keep - 20) + "***")


def test_empty_secret_is_ignored():
    root = render_valid([suite(case("t", Verdict(Outcome.PASS), output="plain"))], redact=["", "\x00"])
    assert only_case(root).find("system-out").text == "plain"


# ---------------------------------------------------------------------------------------------
# Any input: valid, and the counts add up

text = st.text(st.one_of(st.characters(), st.characters(categories=["Cs", "Cc", "Co"])), max_size=20)
durations = st.one_of(st.floats(), st.floats(min_value=0, max_value=1e6))
evidence = st.builds(Evidence, st.one_of(st.none(), st.integers()), text, st.one_of(st.none(), text))


@st.composite
def verdicts(draw, outcomes=tuple(Outcome)):
    outcome = draw(st.sampled_from(outcomes))
    category = None
    if outcome is Outcome.ENV_FAULT:
        category = draw(st.sampled_from(EnvCategory))
    elif outcome is Outcome.ERROR:
        category = draw(st.sampled_from(HarnessErrorKind))
    return Verdict(outcome, category, draw(text), tuple(draw(st.lists(evidence, max_size=3))))


raw = (Outcome.PASS, Outcome.FAIL, Outcome.ENV_FAULT, Outcome.ERROR, Outcome.SKIP)
attempts = st.builds(Attempt, verdicts(raw), durations, text)
known_bugs = st.one_of(st.none(), st.builds(KnownBug, text, st.one_of(st.none(), text)))
cases = st.builds(CaseResult, text, text, verdicts(), st.lists(attempts, max_size=4).map(tuple), durations, text,
                  known_bugs)
suites = st.builds(
    SuiteResult, text, text, st.lists(cases, max_size=6).map(tuple),
    st.dictionaries(text, st.one_of(st.none(), text), max_size=3), st.one_of(st.none(), text), durations,
)

EXPECTED_ELEMENT = {
    Outcome.PASS: None, Outcome.FLAKY: None, Outcome.FAIL: "failure", Outcome.XPASS: "failure",
    Outcome.ENV_FAULT: "error", Outcome.ERROR: "error", Outcome.SKIP: "skipped", Outcome.XFAIL: "skipped",
}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(suites, max_size=3), st.lists(text, max_size=2))
def test_any_results_validate_and_counts_add_up(suite_results, secrets):
    root = render_valid(suite_results, redact=secrets)
    assert len(root) == max(len(suite_results), 1)
    for testsuite, result in zip(root, suite_results):
        testcases = list(testsuite.iter("testcase"))
        outcomes = [c.outcome for c in result.cases] or [Outcome.ERROR]  # the synthetic no-results case
        assert len(testcases) == len(outcomes) == int(testsuite.get("tests"))
        for testcase, outcome in zip(testcases, outcomes):
            tags = [r.tag for r in results(testcase) if not r.tag.startswith("flaky")]
            assert tags == ([EXPECTED_ELEMENT[outcome]] if EXPECTED_ELEMENT[outcome] else [])
        for attribute, tag in (("failures", "failure"), ("errors", "error"), ("skipped", "skipped")):
            assert int(testsuite.get(attribute)) == sum(tc.find(tag) is not None for tc in testcases)
    for attribute in ("tests", "failures", "errors"):
        assert int(root.get(attribute)) == sum(int(s.get(attribute)) for s in root)


# ---------------------------------------------------------------------------------------------
# Writing


def test_write_puts_the_rendered_report_at_path(tmp_path):
    target = tmp_path / "reports" / "junit.xml"
    junit.write(target, [suite(*ALL_OUTCOMES)], redact=["below"])
    assert target.read_bytes() == junit.render([suite(*ALL_OUTCOMES)], redact=["below"])
    assert [p.name for p in target.parent.iterdir()] == ["junit.xml"]


def test_write_failing_midway_leaves_the_old_report_intact(tmp_path, monkeypatch):
    target = tmp_path / "junit.xml"
    junit.write(target, [suite(case("old", Verdict(Outcome.PASS)))])
    old = target.read_bytes()

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    # fsync runs after the new bytes went to the temporary file, before the rename.
    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left"):
        junit.write(target, [suite(case("new", Verdict(Outcome.FAIL)))])
    assert target.read_bytes() == old
    assert [p.name for p in tmp_path.iterdir()] == ["junit.xml"]  # no temporary file left behind


def test_core_module_does_not_pull_in_execution_dependencies():
    code = (
        "import sys, harness.core.junit; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('docker', 'paramiko') or m.startswith('harness.execution')]; "
        "sys.exit(str(bad) if bad else 0)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
