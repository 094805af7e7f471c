"""The classifier's rules on real transcripts: gtest output of a stand-in LayerNorm backward test
binary (tests/data/logs/README.md) and pytest runs, plus hand-made edge cases. Exact outcomes,
categories and evidence line numbers."""

from __future__ import annotations

from pathlib import Path

import pytest

import harness.core.classifier as classifier
from harness.core.classifier import HANG_ADVICE, MAX_EVIDENCE, classify_case, classify_file, classify_log
from harness.core.outcomes import EnvCategory, Outcome

LOGS = Path(__file__).parent / "data" / "logs"


def lines_of(evidence):
    return [(e.line, e.signature) for e in evidence]


# ---------------------------------------------------------------------------------------------
# the seed: mis-mounted container vs real kernel bug


def test_mis_mounted_container_every_setup_failure_is_device_missing():
    verdict = classify_file(LOGS / "gtest_layernorm_no_device.log")
    assert verdict.outcome is Outcome.ENV_FAULT
    assert verdict.category is EnvCategory.DEVICE_MISSING
    assert verdict.message.startswith(
        "5 test(s) failed with environment faults; first: LayerNormBackwardOpTest.MetalLayerNormBw_OneTile: "
        "failed in SetUp() with an environment fault (device-missing): No chips detected in the cluster [metal-no-chips]"
    )
    assert lines_of(verdict.evidence)[:4] == [
        (8, "metal-no-chips"),
        (10, "metal-num-chips-assert"),
        (12, "metal-no-chips"),
        (21, "metal-no-chips"),
    ]


def test_layernorm_accumulation_bug_is_a_real_failure_despite_hugepage_warnings():
    text = (LOGS / "gtest_layernorm_bugrepro.log").read_text()
    assert "Insufficient NumHugepages" in text and "dx FAILED: max_diff=1000, mean_diff=1004.21" in text
    verdict = classify_file(LOGS / "gtest_layernorm_bugrepro.log")
    assert verdict.outcome is Outcome.FAIL
    assert verdict.category is None
    assert verdict.message == (
        "2 failure(s), first: LayerNormBackwardOpTest.BugRepro_Deterministic_256Tiles: failed: "
        "/work/tt-train/tests/ops/layernorm_bw_fused_op_test.cpp:183: Failure"
    )
    assert [(e.line, e.text) for e in verdict.evidence] == [
        (12, "/work/tt-train/tests/ops/layernorm_bw_fused_op_test.cpp:183: Failure"),
        (13, "Value of: xt::allclose(metal_dx_flat, dx_ref, 1.0e-3F, 5e-1F)"),
        (14, "  Actual: false"),
        (24, "/work/tt-train/tests/ops/layernorm_bw_fused_op_test.cpp:183: Failure"),
        (25, "Value of: xt::allclose(metal_dx_flat, dx_ref, 1.0e-3F, 5e-1F)"),
        (26, "  Actual: false"),
    ]


def test_passing_log_with_hugepage_warnings_passes_and_keeps_them_as_context():
    verdict = classify_file(LOGS / "gtest_layernorm_pass_hugepage_warnings.log")
    assert verdict.outcome is Outcome.PASS
    assert verdict.message == "[  PASSED  ] 5 tests."
    assert lines_of(verdict.evidence)[:3] == [
        (45, None),
        (8, "umd-hugepage-numa-bind"),
        (9, "umd-insufficient-hugepages"),
    ]


def test_pcie_hang_crash_is_device_hang_with_reset_advice():
    verdict = classify_file(LOGS / "gtest_layernorm_pcie_hang.log")
    assert verdict.outcome is Outcome.ENV_FAULT
    assert verdict.category is EnvCategory.DEVICE_HANG
    assert "NIGHTLY_MetalLayerNormBw_LargeFeatures_NoL1Fit" in verdict.message
    assert verdict.message.endswith(HANG_ADVICE)
    assert "tt-smi -r" in HANG_ADVICE
    assert lines_of(verdict.evidence) == [(27, "umd-pcie-read-all-ones")]


# ---------------------------------------------------------------------------------------------
# pytest transcripts


def test_pytest_fixture_raising_tt_fatal_is_an_env_fault():
    verdict = classify_file(LOGS / "pytest_fixture_no_device.log")
    assert verdict.outcome is Outcome.ENV_FAULT
    assert verdict.category is EnvCategory.DEVICE_MISSING
    assert "ERROR at setup of test_add_on_device: failed in setup with an environment fault" in verdict.message
    assert lines_of(verdict.evidence) == [(16, "metal-num-chips-assert"), (18, "metal-no-chips")]


def test_pytest_real_failures_outrank_an_env_error_in_another_test():
    verdict = classify_file(LOGS / "pytest_mixed.log")
    assert verdict.outcome is Outcome.FAIL
    assert verdict.message.startswith("3 failure(s), first: ERROR at setup of test_add_golden: failed in setup: ")
    assert verdict.message.endswith("; environment faults were also seen")
    # the fixture error, the PCC assertion, and the "device" assertion that is still a real failure
    assert [e.line for e in verdict.evidence] == [28, 37, 38, 47, 48, 50]


def test_pytest_verbose_pass():
    verdict = classify_file(LOGS / "pytest_pass_verbose.log")
    assert verdict.outcome is Outcome.PASS
    assert lines_of(verdict.evidence) == [(12, None)]


# ---------------------------------------------------------------------------------------------
# rules on hand-made transcripts


RUN = "[ RUN      ] Eltwise.Add"
OK = "[       OK ] Eltwise.Add (3 ms)"
FAILED = "[  FAILED  ] Eltwise.Add (3 ms)"
PASSED = "[  PASSED  ] 1 test."
TT_LOG = "2025-11-07 21:59:20.155 | info     |          Device | Opening user mode device driver (tt_cluster.cpp:197)"


def test_failure_text_mentioning_device_is_still_a_real_failure():
    log = [
        RUN,
        TT_LOG,
        "/work/tests/ttnn/eltwise_test.cpp:77: Failure",
        "Expected equality of these values:",
        "  ttnn.to_device(output).layout",
        "Expected: device output matches reference",
        FAILED,
    ]
    verdict = classify_log(log)
    assert verdict.outcome is Outcome.FAIL
    assert lines_of(verdict.evidence) == [(3, None), (4, None), (6, None)]


def test_fatal_signature_outside_tests_does_not_outrank_a_real_failure():
    log = [
        "2025-11-07 21:59:20.155 | error    |             UMD | Failed to open device /dev/tenstorrent/1: Permission denied (pci_device.cpp:88)",
        RUN,
        "/work/tests/ttnn/eltwise_test.cpp:77: Failure",
        "Value of: allclose(out, ref)",
        FAILED,
    ]
    verdict = classify_log(log)
    assert verdict.outcome is Outcome.FAIL
    assert verdict.message.endswith("environment faults were also seen")
    assert [e.line for e in verdict.evidence] == [3, 4, 5]


def test_fatal_signature_outside_tests_with_all_tests_passing_is_an_env_fault():
    log = [RUN, OK, PASSED, "terminate called after throwing an instance of 'std::runtime_error'", "  what():  DMA timeout."]
    verdict = classify_log(log)
    assert verdict.outcome is Outcome.ENV_FAULT
    assert verdict.category is EnvCategory.DEVICE_HANG
    assert lines_of(verdict.evidence) == [(5, "umd-dma-timeout")]


def test_warnings_do_not_turn_a_crash_into_an_env_fault():
    log = [
        RUN,
        "2025-11-07 21:59:20.155 | warning  |             UMD | Insufficient NumHugepages: 0 should be at least NumMMIODevices: 1 for device_id: 0x401e revision: 1. NumHostMemChannels would be 0, bumping to 1. (hugepage.cpp:112)",
        "Segmentation fault (core dumped)",
    ]
    verdict = classify_log(log)
    assert verdict.outcome is Outcome.FAIL
    assert verdict.message == (
        "1 failure(s), first: Eltwise.Add: failed: [ RUN      ] Eltwise.Add (never reported a result)"
    )
    assert lines_of(verdict.evidence) == [(1, None), (3, None)]


def test_crash_after_a_fatal_signature_in_the_same_test_is_an_env_fault():
    log = [RUN, "  what():  NOC0 appears hung: you should reset the board.", "Aborted (core dumped)"]
    verdict = classify_log(log)
    assert verdict.outcome is Outcome.ENV_FAULT
    assert verdict.category is EnvCategory.DEVICE_HANG
    assert HANG_ADVICE in verdict.message


def test_old_umd_found_zero_chips_then_segfault_outside_tests_is_device_missing():
    log = ["2024-02-10 10:01:02.345 | INFO     | SiliconDriver   - Detecting chips (found 0)", "Segmentation fault"]
    verdict = classify_log(log)
    assert verdict.outcome is Outcome.ENV_FAULT
    assert verdict.category is EnvCategory.DEVICE_MISSING
    assert lines_of(verdict.evidence) == [(1, "umd-found-zero-chips")]


def test_dispatch_timeout_in_a_test_is_device_hang():
    log = [
        RUN,
        "unknown file: Failure",
        'C++ exception with description "TT_THROW @ tt_metal/impl/dispatch/system_memory_manager.cpp:627: tt::exception',
        "info:",
        "TIMEOUT: device timeout, potential hang detected, the device is unrecoverable",
        '" thrown in the test body.',
        FAILED,
    ]
    verdict = classify_log(log)
    assert verdict.category is EnvCategory.DEVICE_HANG
    assert "Eltwise.Add: failed in the test body with an environment fault (device-hang)" in verdict.message
    assert lines_of(verdict.evidence) == [(5, "metal-dispatch-timeout")]


def test_a_log_with_nothing_recognizable_is_a_failure_without_verdict():
    verdict = classify_log(["building...", TT_LOG, "done"])
    assert verdict.outcome is Outcome.FAIL
    assert verdict.message.startswith("no verdict in log")
    assert verdict.evidence == ()


def test_an_empty_log_has_no_verdict():
    assert classify_log([]).message.startswith("no verdict in log")


def test_summary_lines_alone_still_fail():
    verdict = classify_log(["[  PASSED  ] 0 tests.", "[  FAILED  ] 1 test, listed below:", "[  FAILED  ] Eltwise.Add"])
    assert verdict.outcome is Outcome.FAIL
    assert verdict.message.startswith("1 test(s) reported failed (no failure details in the log)")
    assert lines_of(verdict.evidence) == [(3, None)]


def test_pytest_short_summary_alone_with_an_env_signature_is_an_env_fault():
    log = [
        "ERROR tests/test_eltwise.py::test_add - RuntimeError: TT_FATAL @ /project/tt_metal/llrt/tt_cluster.cpp:129: num_chips > 0",
        "======================== 1 error in 0.87s ========================",
    ]
    verdict = classify_log(log)
    assert verdict.outcome is Outcome.ENV_FAULT
    assert lines_of(verdict.evidence) == [(1, "metal-num-chips-assert")]


def test_pytest_quiet_summary_counts():
    assert classify_log(["..", "2 passed in 0.12s"]).outcome is Outcome.PASS
    failed = classify_log(["F.", "1 failed, 1 passed in 0.12s"])
    assert failed.outcome is Outcome.FAIL
    assert lines_of(failed.evidence) == [(2, None)]


def test_a_fatal_line_inside_a_passing_test_is_ignored():
    log = [RUN, "No chips detected in the cluster", OK, PASSED]
    assert classify_log(log).outcome is Outcome.PASS


def test_docker_and_ssh_failures_before_any_test():
    docker = classify_log(
        ["Unable to find image 'tt-metalium/ubuntu-22.04-dev-amd64:latest' locally",
         "docker: Error response from daemon: pull access denied for tt-metalium/ubuntu-22.04-dev-amd64, "
         "repository does not exist or may require 'docker login': denied: requested access to the resource is denied."]
    )
    assert (docker.outcome, docker.category) == (Outcome.ENV_FAULT, EnvCategory.IMAGE)
    assert lines_of(docker.evidence) == [(2, "docker-pull-denied")]
    ssh = classify_log(["lab@tt-n150-01: Permission denied (publickey,password)."])
    assert (ssh.outcome, ssh.category) == (Outcome.ENV_FAULT, EnvCategory.SSH)


# ---------------------------------------------------------------------------------------------
# classify_case


def test_classify_case_locates_evidence_from_first_line():
    text = 'unknown file\nC++ exception with description "TT_FATAL @ /work/tt_cluster.cpp:129: num_chips > 0\ninfo:\nNo chips detected in the cluster'
    verdict = classify_case(text, first_line=40)
    assert verdict.outcome is Outcome.ENV_FAULT
    assert lines_of(verdict.evidence) == [(41, "metal-num-chips-assert"), (43, "metal-no-chips")]


def test_classify_case_without_signature_is_fail_with_assertion_lines_and_warning_context():
    text = (
        "/work/layernorm_bw_fused_op_test.cpp:183\nValue of: xt::allclose(metal_dx_flat, dx_ref, 1.0e-3F, 5e-1F)\n"
        "  Actual: false\nExpected: true\nbind_area_to_memory_nodeset() failed"
    )
    verdict = classify_case(text)
    assert verdict.outcome is Outcome.FAIL
    assert verdict.message == "Value of: xt::allclose(metal_dx_flat, dx_ref, 1.0e-3F, 5e-1F)"
    assert lines_of(verdict.evidence) == [(2, None), (3, None), (4, None), (5, "umd-hugepage-numa-bind")]


def test_classify_case_with_unrecognized_text_uses_its_first_line():
    verdict = classify_case("\nsomething odd happened\nmore")
    assert (verdict.outcome, verdict.message) == (Outcome.FAIL, "something odd happened")
    assert lines_of(verdict.evidence) == [(2, None)]


# ---------------------------------------------------------------------------------------------
# streaming: exact line numbers at any chunking, bounded memory


@pytest.mark.parametrize("name", sorted(p.name for p in LOGS.glob("*.log")))
def test_lines_api_file_api_and_tiny_chunks_agree(name, monkeypatch):
    path = LOGS / name
    reference = classify_file(path)
    with open(path, encoding="utf-8") as lines:
        assert classify_log(lines) == reference
    monkeypatch.setattr(classifier, "_CHUNK", 7)  # every line straddles reads
    assert classify_file(path) == reference


def test_crlf_line_endings(tmp_path):
    path = tmp_path / "crlf.log"
    path.write_bytes(b"\r\n".join([RUN.encode(), b"No chips detected in the cluster", FAILED.encode()]) + b"\r\n")
    verdict = classify_file(path)
    assert verdict.category is EnvCategory.DEVICE_MISSING
    assert [(e.line, e.text) for e in verdict.evidence] == [(2, "No chips detected in the cluster")]


def test_overlong_lines_are_matched_in_pieces_with_exact_line_numbers(tmp_path, monkeypatch):
    monkeypatch.setattr(classifier, "_CHUNK", 64)
    monkeypatch.setattr(classifier, "_MAX_LINE", 256)
    path = tmp_path / "long.log"
    path.write_text("x" * 1000 + " Read 0xffffffff from PCIE: you should reset the board. " + "y" * 1000 + "\nok\n")
    verdict = classify_file(path)
    assert verdict.category is EnvCategory.DEVICE_HANG
    assert [e.line for e in verdict.evidence] == [1]


def test_lines_api_consumes_a_generator_once():
    consumed = []

    def lines():
        for line in [RUN, "No chips detected in the cluster", FAILED]:
            consumed.append(line)
            yield line + "\n"

    verdict = classify_log(lines())
    assert consumed == [RUN, "No chips detected in the cluster", FAILED]
    assert verdict.outcome is Outcome.ENV_FAULT


def test_evidence_stays_bounded_over_many_failures():
    def log():
        for i in range(20_000):
            yield f"[ RUN      ] Suite.T{i}"
            yield f"t.cpp:{i}: Failure"
            yield f"[  FAILED  ] Suite.T{i} (0 ms)"

    verdict = classify_log(log())
    assert verdict.outcome is Outcome.FAIL
    assert verdict.message.startswith("20000 failure(s), first: Suite.T0: failed: t.cpp:0: Failure")
    assert len(verdict.evidence) == MAX_EVIDENCE
