"""JUnit ingestion: real gtest and pytest (xunit1, xunit2) reports into per-test verdicts, and
hostile or broken XML refused cleanly."""

from __future__ import annotations

from pathlib import Path

import pytest

import harness.core.ingest as ingest
from harness.core.ingest import IngestError, looks_like_junit, parse_junit, read_junit, report_verdict
from harness.core.outcomes import EnvCategory, Outcome

XML = Path(__file__).parent / "data" / "xml"


def summary(cases):
    return [(c.name, c.outcome, c.verdict.category) for c in cases]


def test_gtest_mis_mounted_container_makes_every_case_device_missing():
    cases = read_junit(XML / "gtest_layernorm_no_device.xml")
    assert [c.name for c in cases] == [
        "MetalLayerNormBw_OneTile",
        "MetalLayerNormBw_TwoIncompleteTiles",
        "NIGHTLY_MetalLayerNormBw_LargeFeatures_NoL1Fit",
        "MetalLayerNormBw_DoesNotFitInL1_WtNotDivisibleBy4",
        "MetalLayerNormBw_OneTilePerRow",
    ]
    assert {(c.classname, c.outcome, c.verdict.category) for c in cases} == {
        ("LayerNormBackwardOpTest", Outcome.ENV_FAULT, EnvCategory.DEVICE_MISSING)
    }
    # evidence points into the XML file: the CDATA text of each <failure>
    assert [[(e.line, e.signature) for e in c.verdict.evidence] for c in cases] == [
        [(6, "metal-num-chips-assert"), (8, "metal-no-chips")],
        [(16, "metal-num-chips-assert"), (18, "metal-no-chips")],
        [(26, "metal-num-chips-assert"), (28, "metal-no-chips")],
        [(36, "metal-num-chips-assert"), (38, "metal-no-chips")],
        [(46, "metal-num-chips-assert"), (48, "metal-no-chips")],
    ]
    lines = (XML / "gtest_layernorm_no_device.xml").read_text().splitlines()
    assert lines[7] == "No chips detected in the cluster"
    verdict = report_verdict(cases)
    assert (verdict.outcome, verdict.category) == (Outcome.ENV_FAULT, EnvCategory.DEVICE_MISSING)
    assert verdict.message.startswith("5 of 5 test(s) hit environment faults; first: LayerNormBackwardOpTest.MetalLayerNormBw_OneTile: ")


def test_gtest_kernel_bug_cases_are_real_failures():
    cases = read_junit(XML / "gtest_layernorm_bugrepro.xml")
    assert summary(cases) == [
        ("BugRepro_Deterministic_256Tiles", Outcome.FAIL, None),
        ("BugRepro_Deterministic_128Tiles", Outcome.FAIL, None),
    ]
    first = cases[0]
    assert first.verdict.message == "Value of: xt::allclose(metal_dx_flat, dx_ref, 1.0e-3F, 5e-1F)"
    assert [e.line for e in first.verdict.evidence] == [6, 7, 8]
    assert first.output.startswith("/work/tt-train/tests/ops/layernorm_bw_fused_op_test.cpp:183\nValue of:")
    assert report_verdict(cases).outcome is Outcome.FAIL


def test_gtest_passing_report():
    cases = read_junit(XML / "gtest_layernorm_pass.xml")
    assert {c.outcome for c in cases} == {Outcome.PASS}
    assert report_verdict(cases).message == "5 pass"


@pytest.mark.parametrize("name", ["pytest_xunit1.xml", "pytest_xunit2.xml"])
def test_pytest_reports_both_families(name):
    cases = read_junit(XML / name)
    assert summary(cases) == [
        ("test_add_passes", Outcome.PASS, None),
        ("test_add_on_device", Outcome.ENV_FAULT, EnvCategory.DEVICE_MISSING),
        ("test_add_pcc", Outcome.FAIL, None),
        ("test_to_device_roundtrip", Outcome.FAIL, None),
        ("test_add_golden", Outcome.FAIL, None),
        ("test_layernorm_bw_large", Outcome.XFAIL, None),
        ("test_multichip", Outcome.SKIP, None),
    ]
    by_name = {c.name: c for c in cases}
    # the fixture error carrying TT_FATAL / No chips: env fault, located in the file
    env = by_name["test_add_on_device"].verdict
    assert [(e.line, e.signature) for e in env.evidence] == [(5, "metal-num-chips-assert"), (7, "metal-no-chips")]
    # a fixture error without a signature is the suite's failure, named as a setup failure
    setup = by_name["test_add_golden"].verdict
    assert setup.message.startswith("setup (fixture) failed: E       FileNotFoundError:")
    # an assertion whose message talks about the device is still a real failure
    device_words = by_name["test_to_device_roundtrip"].verdict
    assert device_words.message == (
        "E       AssertionError: ttnn.to_device round trip: device output does not match reference"
    )
    assert by_name["test_add_pcc"].verdict.message == "E       AssertionError: PCC check failed: 0.4187 < 0.999"
    assert by_name["test_layernorm_bw_large"].verdict.message == "tt-metal#33920 accumulation bug"
    assert by_name["test_add_pcc"].classname == "tests.test_eltwise"
    verdict = report_verdict(cases)
    assert verdict.outcome is Outcome.FAIL
    assert verdict.message.startswith("3 of 7 test(s) failed; first: tests.test_eltwise.test_add_pcc: ")


BARE_SUITE = b"""<?xml version="1.0" encoding="utf-8"?>
<testsuite name="pytest" errors="1" failures="0" skipped="1" tests="3" time="0.1">
  <testcase classname="t" name="a" time="1,234.5"/>
  <testcase classname="t" name="b" time="0.1"><error message="failed on teardown with &quot;RuntimeError: boom&quot;">E   RuntimeError: boom</error></testcase>
  <testcase classname="Suite" name="DISABLED_c" status="notrun" result="suppressed" time="0"/>
</testsuite>
"""


def test_bare_testsuite_root_teardown_error_and_disabled_gtest_case():
    cases = parse_junit(BARE_SUITE, "bare.xml")
    assert summary(cases) == [("a", Outcome.PASS, None), ("b", Outcome.FAIL, None), ("DISABLED_c", Outcome.SKIP, None)]
    assert cases[0].duration == 1234.5
    assert cases[1].verdict.message == "teardown failed: E   RuntimeError: boom"
    assert [e.line for e in cases[1].verdict.evidence] == [4]


def test_error_without_text_is_classified_from_its_message_attribute():
    data = b'<testsuites><testsuite name="s"><testcase name="x"><failure message="Read 0xffffffff from PCIE: you should reset the board."/></testcase></testsuite></testsuites>'
    (case,) = parse_junit(data, "m.xml")
    assert (case.outcome, case.verdict.category) == (Outcome.ENV_FAULT, EnvCategory.DEVICE_HANG)
    assert [e.line for e in case.verdict.evidence] == [1]


def test_a_report_without_cases_fails():
    verdict = report_verdict(parse_junit(b'<testsuites tests="0" name="AllTests"></testsuites>', "empty.xml"))
    assert (verdict.outcome, verdict.message) == (Outcome.FAIL, "the report lists no test cases")


@pytest.mark.parametrize(
    "head, expected",
    [
        (b'<?xml version="1.0"?><testsuites/>', True),
        (b"\xef\xbb\xbf  \n<testsuite name='x'>", True),
        (b"<testsuites>", True),
        (b"2025-11-07 21:59:20.155 | info     | UMD | ...", False),
        (b"[ RUN      ] A.B", False),
        (b"", False),
    ],
)
def test_looks_like_junit(head, expected):
    assert looks_like_junit(head) is expected


# ---------------------------------------------------------------------------------------------
# hostile and broken input


BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
]>
<testsuites><testsuite name="s"><testcase name="x"><failure>&lol3;</failure></testcase></testsuite></testsuites>
"""

EXTERNAL_ENTITY = b"""<?xml version="1.0"?>
<!DOCTYPE testsuites [ <!ENTITY secret SYSTEM "file:///etc/passwd"> ]>
<testsuites><testsuite name="s"><testcase name="x"><failure>&secret;</failure></testcase></testsuite></testsuites>
"""


@pytest.mark.parametrize("data", [BILLION_LAUGHS, EXTERNAL_ENTITY], ids=["billion-laughs", "external-entity"])
def test_dtds_and_entities_are_refused(data):
    with pytest.raises(IngestError) as caught:
        parse_junit(data, "evil.xml")
    assert str(caught.value) == "evil.xml: DTDs are not allowed in test reports (entity expansion is refused)"


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"<testsuites><testsuite>", "malformed XML at line 1, column 24: no element found"),
        (b'<testsuites>\n  <testcase name="x"></testsuite>', "malformed XML at line 2, column 24: mismatched tag"),
        (b"<html><body/></html>", "not a JUnit report: the root element is <html>"),
        (b"", "malformed XML at line 1, column 1: no element found"),
        (b"<testsuites><testcase><testcase/></testcase></testsuites>", "line 1: <testcase> inside another <testcase>"),
    ],
)
def test_malformed_reports_raise_ingest_error(data, reason):
    with pytest.raises(IngestError) as caught:
        parse_junit(data, "bad.xml")
    assert (caught.value.path, caught.value.reason) == ("bad.xml", reason)


def test_oversize_reports_are_refused_before_parsing(tmp_path, monkeypatch):
    monkeypatch.setattr(ingest, "MAX_REPORT_BYTES", 1024)
    path = tmp_path / "big.xml"
    path.write_bytes(b"<testsuites>" + b" " * 2000 + b"</testsuites>")
    with pytest.raises(IngestError) as caught:
        read_junit(path)
    assert caught.value.reason == "report is 2025 bytes; reports over 1024 bytes are refused"


def test_the_real_limit_refuses_a_65_mb_file_without_reading_it(tmp_path):
    path = tmp_path / "huge.xml"
    with open(path, "wb") as out:
        out.truncate(65 * 1024 * 1024)  # sparse: nothing is written or read
    with pytest.raises(IngestError, match="reports over 67108864 bytes are refused"):
        read_junit(path)


def test_missing_file_is_an_ingest_error(tmp_path):
    with pytest.raises(IngestError) as caught:
        read_junit(tmp_path / "nope.xml")
    assert caught.value.reason == "No such file or directory"
