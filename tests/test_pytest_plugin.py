"""The pytest plugin (harness/pytest_plugin.py), run by pytester on real error strings.

The strings are the verbatim examples of configs/signatures.yaml (tt-metal's and tt-umd's own
messages), raised or printed the way tt-metal's pytest suites meet them: from a fixture that
opens the device, from the test itself, in captured output.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import defusedxml.ElementTree as safe_xml
import pytest
import xmlschema
import yaml

from tests.paths import JUNIT_XSD

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = {s["id"]: s["example"] for s in yaml.safe_load((REPO / "configs" / "signatures.yaml").read_text())["signatures"]}
NO_CHIPS = EXAMPLES["metal-no-chips"]  # "... | critical | Always | No chips detected in the cluster (assert.hpp:103)"
HUGEPAGES = EXAMPLES["metal-insufficient-hugepages"]  # fatal
TLB_BUSY = EXAMPLES["umd-tlb-exhausted"]  # fatal, device-busy
NOC_WARNING = EXAMPLES["umd-hugepage-noc-mismatch"]  # a warning: context only
LOCK_WAIT = EXAMPLES["umd-waiting-for-lock"]  # a wait: decides only if the test never got past it


def suite(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_device=textwrap.dedent(f"""
        import pytest

        @pytest.fixture
        def device():
            # ttnn.open_device raising what tt-metal logs when the container sees no card
            raise RuntimeError({NO_CHIPS!r})

        def test_open(device):
            pass

        def test_hugepages():
            raise RuntimeError("TT_FATAL @ /project/tt_metal/llrt/tt_cluster.cpp:231: " + {HUGEPAGES!r})

        def test_busy_in_output():
            print({TLB_BUSY!r})
            raise RuntimeError("device open failed")

        def test_real_failure():
            assert sum([1, 2]) == 4

        def test_warning_beside_a_real_failure():
            print({NOC_WARNING!r})
            assert [0.5, 0.25] == [0.5, 0.0]

        def test_a_wait_that_ended_before_a_real_failure():
            print({LOCK_WAIT!r})  # UMD got the card in the end
            assert [0.5, 0.25] == [0.5, 0.0]

        def channels():
            return 2

        def test_source_mentions_the_string():
            banner = "No chips detected in the cluster"  # a source line in the traceback, not an error
            assert channels() == 3

        @pytest.mark.xfail(reason="known: no card in CI")
        def test_known(device):
            pass

        def test_passes():
            pass

        @pytest.fixture
        def leaves_the_card_hung():
            yield
            raise RuntimeError("Read 0xffffffff from PCIE: you should reset the board.")

        def test_teardown_hang(leaves_the_card_hung):
            pass
    """))


def junit_cases(path: Path) -> dict[str, list]:
    root = safe_xml.parse(path).getroot()
    return {case.get("name"): list(case) for case in root.iter("testcase")}


def test_inert_unless_enabled(pytester):
    suite(pytester)
    result = pytester.runpytest("--junitxml=report.xml")
    result.assert_outcomes(passed=2, failed=6, errors=2, xfailed=1)  # teardown hang: a pass and an error
    out = result.stdout.str()
    assert "plugins: tt-harness-" in out  # installed through its pytest11 entry point, and loaded
    assert "tt-harness: environment" not in out and "environment/" not in out
    for name, children in junit_cases(pytester.path / "report.xml").items():
        assert all(not (node.get("type") or "").startswith("environment/") for node in children), name
    assert "--tt-harness" in pytester.runpytest("--help").stdout.str()


def test_fatal_signatures_become_environment_errors_real_failures_stay(pytester):
    suite(pytester)
    result = pytester.runpytest("--tt-harness", "--junitxml=report.xml", "-rA")
    # test_open (setup), test_hugepages and test_busy_in_output (call), the teardown hang:
    # errors; the assertion, the warning-only one, the ended wait, the look-alike source line: failures.
    result.assert_outcomes(passed=2, failed=4, errors=4, xfailed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    summary = out[out.index("tt-harness: environment faults"):]
    assert "ERROR test_device.py::test_open environment/device-missing: failed with an environment fault " \
           "(device-missing): No chips detected in the cluster [metal-no-chips]" in summary
    assert "ERROR test_device.py::test_hugepages environment/hugepages: " in summary
    assert "Insufficient number of hugepages available" in summary and "[metal-insufficient-hugepages]" in summary
    assert "ERROR test_device.py::test_busy_in_output environment/device-busy: " in summary
    assert "Failed to allocate TLB window." in summary and "[umd-tlb-exhausted]" in summary
    assert "ERROR test_device.py::test_teardown_hang environment/device-hang: " in summary
    for name in ("test_real_failure", "test_warning_beside_a_real_failure", "test_a_wait_that_ended_before_a_real_failure",
                 "test_source_mentions_the_string"):
        assert f"FAILED test_device.py::{name}" in out and f"ERROR test_device.py::{name}" not in out
    # The deciding lines also sit under the test's own traceback.
    assert "tt-harness: environment/hugepages" in out

    cases = junit_cases(pytester.path / "report.xml")
    errors = {name: [n for n in nodes if n.tag == "error"] for name, nodes in cases.items()}
    for name, category, signature in [
        ("test_open", "device-missing", "metal-no-chips"),
        ("test_hugepages", "hugepages", "metal-insufficient-hugepages"),
        ("test_busy_in_output", "device-busy", "umd-tlb-exhausted"),
    ]:
        (error,) = errors[name]
        assert error.get("type") == f"environment/{category}", name
        assert error.get("message").startswith(f"environment/{category}: failed with an environment fault")
        assert f"[{signature}]" in error.get("message") and f"[{signature}]" in error.text
        assert error.text.startswith("deciding lines:\n")
        assert not [n for n in cases[name] if n.tag == "failure"]
        assert not [n for n in cases[name] if n.tag == "properties"]
    assert "Traceback" in errors["test_hugepages"][0].text or "RuntimeError" in errors["test_hugepages"][0].text
    hang = [n for n in cases["test_teardown_hang"] if n.tag == "error"]
    assert [n.get("type") for n in hang] == ["environment/device-hang"]
    for name in ("test_real_failure", "test_warning_beside_a_real_failure", "test_a_wait_that_ended_before_a_real_failure",
                 "test_source_mentions_the_string"):
        (failure,) = [n for n in cases[name] if n.tag == "failure"]
        assert not errors[name] and failure.get("type") is None
    assert [n.get("type") for n in cases["test_known"]] == ["pytest.xfail"]
    root = safe_xml.parse(pytester.path / "report.xml").getroot()
    (testsuite,) = root.iter("testsuite")
    assert (testsuite.get("failures"), testsuite.get("errors")) == ("4", "4")


def test_the_report_stays_valid_junit(pytester):
    suite(pytester)
    pytester.runpytest("--tt-harness", "--junitxml=report.xml")  # xunit2, pytest's default
    xmlschema.XMLSchema(str(JUNIT_XSD)).validate(str(pytester.path / "report.xml"))


def test_the_ini_option_enables_it(pytester):
    pytester.makeini("[pytest]\ntt_harness = true\n")
    pytester.makepyfile(test_one=f"def test_open():\n    raise RuntimeError({NO_CHIPS!r})\n")
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*tt-harness: environment faults*", "ERROR test_one.py::test_open environment/device-missing: *"])


def test_without_junitxml_the_terminal_still_says_it(pytester):
    pytester.makepyfile(test_one=f"def test_open():\n    raise RuntimeError({NO_CHIPS!r})\n")
    result = pytester.runpytest("--tt-harness", "-p", "no:junitxml")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["ERROR test_one.py::test_open environment/device-missing: *metal-no-chips*"])


def test_the_plugin_loads_neither_docker_nor_paramiko(pytester):
    pytester.makepyfile(test_mods="""
        import sys

        def test_no_heavy_modules():
            assert not {"docker", "paramiko", "sqlalchemy"} & set(sys.modules)
    """)
    result = pytester.runpytest_subprocess("--tt-harness")
    result.assert_outcomes(passed=1)
