"""The judging rules shared by every executor, on real log lines (harness/core/judge.py)."""

from __future__ import annotations

from harness.core.judge import after_timeout, judge_log, without_report
from harness.core.outcomes import EnvCategory, HarnessErrorKind, Outcome, Verdict

NO_CHIPS = "2025-11-07 21:59:20.155 | critical |          Always | No chips detected in the cluster (assert.hpp:103)"
PCIE_HANG = "Read 0xffffffff from PCIe: you should reset the board."
ASSERTION = "layernorm_bw_fused_op_test.cpp:183: Failure"
LOCK_WAIT = "Waiting for lock 'CHIP_IN_USE_0_PCIe' which is currently held by thread TID: 4242, PID: 4242"


def test_exit_zero_is_a_pass_unless_the_log_shows_the_environment_broke():
    assert judge_log(["all good"], 0).outcome is Outcome.PASS
    broken = judge_log([NO_CHIPS], 0)
    assert broken.outcome is Outcome.ENV_FAULT and broken.category is EnvCategory.DEVICE_MISSING


def test_a_nonzero_exit_is_a_failure_whether_or_not_the_log_names_one():
    assert judge_log(["something odd"], 2).outcome is Outcome.FAIL
    assert "exited 2" in judge_log(["something odd"], 2).message


def test_a_device_hang_in_the_log_beats_a_plain_timeout():
    timeout = Verdict.env_fault(EnvCategory.TIMEOUT, "killed after its timeout of 5 s")
    assert after_timeout(timeout, ["still working"]) is timeout
    assert after_timeout(timeout, [PCIE_HANG]).category is EnvCategory.DEVICE_HANG


def test_a_card_lock_wait_that_never_ended_beats_a_timeout_and_a_failing_exit():
    timeout = Verdict.env_fault(EnvCategory.TIMEOUT, "killed after its timeout of 5 s")
    assert after_timeout(timeout, ["opening device 0", LOCK_WAIT]).category is EnvCategory.DEVICE_BUSY
    assert judge_log(["opening device 0", LOCK_WAIT], 143).category is EnvCategory.DEVICE_BUSY
    assert judge_log(["opening device 0", LOCK_WAIT, "device opened"], 0).outcome is Outcome.PASS  # it got the card


def test_a_missing_report_is_never_a_pass():
    quiet = without_report("gtest", "gtest.xml", ["[==========] 0 tests ran."], 0)
    assert quiet.outcome is Outcome.ERROR and quiet.category is HarnessErrorKind.ARTIFACT
    assert without_report("gtest", "gtest.xml", [NO_CHIPS], 1).category is EnvCategory.DEVICE_MISSING
