"""The classifier's judgement beyond single lines: the cause behind a symptom, waits that never
ended, runs that print their own summary or none, and the step's exit code (issue 10)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness.core.classifier import classify_case, classify_log
from harness.core.outcomes import EnvCategory, Outcome

# tt-logger framing, as tt-metal prints it (reference/ttmetal.md §4.0)
T = "2025-11-07 21:59:20.155 | "
NO_MOUNT = (
    T + "warning  |             UMD | ttSiliconDevice::find_hugepage_dir: no huge page mount found in /proc/mounts "
    "for path: /dev/hugepages-1G with hugepage_size: 1073741824. (hugepage.cpp:153)"
)
NO_SYSMEM = "Broadcasts not available without system memory."
LOCK_WAIT = (
    T + "warning  |             UMD | Waiting for lock 'CHIP_IN_USE_0_PCIe' which is currently held by thread "
    "TID: 4242, PID: 4242 (robust_mutex.cpp:471)"
)
RUN = "[ RUN      ] LayerNormBackwardOpTest.MetalLayerNormBw_OneTile"
OK = "[       OK ] LayerNormBackwardOpTest.MetalLayerNormBw_OneTile (12 ms)"
PASSED = "[  PASSED  ] 1 test."


def setup_throws(message: str) -> list[str]:
    return [
        "unknown file: Failure",
        f'C++ exception with description "{message}" thrown in SetUp().',
        "[  FAILED  ] LayerNormBackwardOpTest.MetalLayerNormBw_OneTile (3 ms)",
    ]


# -- the cause, not the symptom ---------------------------------------------------------------


def test_a_symptom_follows_the_cause_an_earlier_line_names_with_both_lines_as_evidence():
    verdict = classify_log([RUN, NO_MOUNT, *setup_throws(NO_SYSMEM)])
    assert verdict.outcome is Outcome.ENV_FAULT and verdict.category is EnvCategory.HUGEPAGES
    assert [e.signature for e in verdict.evidence[:2]] == ["umd-no-hugepage-mount", "umd-broadcast-without-sysmem"]
    assert [e.line for e in verdict.evidence[:2]] == [2, 4]
    assert "no huge page mount found" in verdict.message and "which then caused: Broadcasts" in verdict.message


def test_a_symptom_alone_keeps_its_own_category_and_a_later_cause_line_is_not_its_cause():
    alone = classify_log([RUN, *setup_throws(NO_SYSMEM)])
    assert alone.category is EnvCategory.HUGEPAGES and [e.signature for e in alone.evidence] == ["umd-broadcast-without-sysmem"]
    later = classify_case("\n".join([NO_SYSMEM, NO_MOUNT]))
    assert [e.signature for e in later.evidence] == ["umd-broadcast-without-sysmem"]


# -- waits that never end ---------------------------------------------------------------------


def test_a_test_killed_while_waiting_for_a_card_lock_is_device_busy():
    verdict = classify_log([RUN, LOCK_WAIT, "Terminated"])
    assert verdict.outcome is Outcome.ENV_FAULT and verdict.category is EnvCategory.DEVICE_BUSY
    assert "still waiting" in verdict.message and verdict.evidence[0].signature == "umd-waiting-for-lock"


def test_a_process_killed_while_waiting_is_device_busy_with_or_without_the_exit_code():
    lines = ["$ ./build/test/tt_metal/unit_tests_api", LOCK_WAIT, "timeout: sending signal TERM to command ‘unit_tests_api’"]
    assert classify_log(lines).category is EnvCategory.DEVICE_BUSY
    assert classify_log(lines, exit_code=124).category is EnvCategory.DEVICE_BUSY
    assert "was killed" in classify_log(lines).message


def test_a_wait_that_ended_decides_nothing():
    assert classify_log([LOCK_WAIT, RUN, OK, PASSED]).outcome is Outcome.PASS
    assert classify_log([RUN, LOCK_WAIT, OK, PASSED]).outcome is Outcome.PASS
    assert classify_log(["$ ./smoke", LOCK_WAIT], exit_code=0).outcome is Outcome.PASS


def test_a_real_failure_after_a_wait_stays_a_real_failure():
    lines = [
        RUN, LOCK_WAIT,
        "/work/tt-train/tests/ops/layernorm_bw_fused_op_test.cpp:212: Failure",
        "Expected: (max_abs_diff) < (1e-2), actual: 0.98 vs 0.01",
        "[  FAILED  ] LayerNormBackwardOpTest.MetalLayerNormBw_OneTile (40 ms)",
    ]
    verdict = classify_log(lines)
    assert verdict.outcome is Outcome.FAIL


# -- summaries and the exit code --------------------------------------------------------------


def test_runners_own_summaries_decide():
    assert classify_log(["Test project /build", "100% tests passed, 0 tests failed out of 12"]).outcome is Outcome.PASS
    failed = classify_log(["Test project /build", "92% tests passed, 1 tests failed out of 12"])
    assert failed.outcome is Outcome.FAIL
    lit = ["Total Discovered Tests: 1186", "  Unsupported:   73 (6.16%)", "  Passed     : 1113 (93.84%)"]
    assert classify_log(lit).outcome is Outcome.PASS
    assert classify_log([*lit[:2], "  Passed     : 1111 (93.68%)", "  Failed     :    2 (0.17%)"]).outcome is Outcome.FAIL
    assert classify_log(["$ ./run.sh", "##[error]Process completed with exit code 1."]).outcome is Outcome.FAIL


@pytest.mark.parametrize(
    "exit_code, outcome, words",
    [
        (None, Outcome.FAIL, "no verdict in log"),
        (0, Outcome.PASS, "the step exited 0"),
        (2, Outcome.FAIL, "no verdict in log"),
    ],
)
def test_a_log_without_a_verdict_is_judged_by_the_exit_code_or_says_no_verdict(exit_code, outcome, words):
    verdict = classify_log(["Loading model...", "Generated 128 tokens"], exit_code=exit_code)
    assert verdict.outcome is outcome and words in verdict.message


def test_a_failing_exit_code_beats_a_success_summary_and_never_hides_a_failure_or_a_fault():
    assert classify_log([RUN, OK, PASSED], exit_code=1).outcome is Outcome.FAIL
    failure = [RUN, "foo.cpp:1: Failure", "Value of: x", "[  FAILED  ] LayerNormBackwardOpTest.MetalLayerNormBw_OneTile (1 ms)"]
    assert classify_log(failure, exit_code=0).outcome is Outcome.FAIL
    assert classify_log([RUN, *setup_throws("No chips detected in the cluster")], exit_code=0).outcome is Outcome.ENV_FAULT


def test_classify_cli_takes_the_exit_code(tmp_path):
    log = tmp_path / "step.log"
    log.write_text("Loading model...\nGenerated 128 tokens\n")

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "harness", "classify", *args, str(log)], capture_output=True, text=True)

    passed, failed, plain = run("--exit-code", "0"), run("--exit-code", "3"), run()
    assert passed.returncode == 0 and ": pass: the step exited 0" in passed.stdout
    assert failed.returncode == 1 and "no verdict in log" in failed.stdout and "the step exited 3" in failed.stdout
    assert plain.returncode == 1 and "no verdict in log" in plain.stdout
    assert run("--exit-code", "-1").returncode == 2


# -- look-alikes: quoted values are not events ------------------------------------------------


def test_a_test_comparing_an_environment_string_is_a_real_failure():
    pytest_failure = [
        "=================================== FAILURES ===================================",
        "__________________________ test_summary_names_missing_card __________________________",
        '>       assert summary.headline == "No chips detected in the cluster"',
        "E       AssertionError: assert 'TT_FATAL @ tt_cluster.cpp:129: num_chips > 0' == 'No chips detected in the cluster'",
        "E         - No chips detected in the cluster",
        "E         + TT_FATAL @ tt_cluster.cpp:129: num_chips > 0",
        "FAILED tests/test_log.py::test_summary_names_missing_card - AssertionError: assert 'TT_FATAL @ tt_cluster.cpp:129: num_chips > 0' == 'x'",
        "========================= 1 failed, 8 passed in 0.21s ==========================",
    ]
    assert classify_log(pytest_failure).outcome is Outcome.FAIL
    assert classify_log(pytest_failure[-2:]).outcome is Outcome.FAIL  # --tb=no: the summary line alone
    gtest_failure = [
        RUN, "log_test.cpp:12: Failure", "Expected equality of these values:", "  summary.headline",
        '    Which is: "No chips detected in the cluster"', '  "TT_FATAL"',
        "[  FAILED  ] LayerNormBackwardOpTest.MetalLayerNormBw_OneTile (1 ms)",
    ]
    assert classify_log(gtest_failure).outcome is Outcome.FAIL


def test_an_exception_carrying_an_environment_string_is_still_the_environment():
    lines = [
        "=================================== FAILURES ===================================",
        "__________________________ test_open_device __________________________",
        "E       RuntimeError: TT_FATAL @ /project/tt_metal/llrt/tt_cluster.cpp:129: num_chips > 0",
        "E       info:",
        "E       No chips detected in the cluster",
        "FAILED tests/test_open.py::test_open_device - RuntimeError: TT_FATAL @ /project/tt_metal/llrt/tt_cluster.cpp:129: num_chips > 0",
    ]
    assert classify_log(lines).category is EnvCategory.DEVICE_MISSING
