"""The signature catalog: every entry is valid, matches its verbatim example and classifies it
into its category; the loader reports bad entries as path:line:col; the prefilter never loses
a match."""

from __future__ import annotations

import random
import re

import pytest

from harness.core.classifier import classify_case, classify_log
from harness.core.errors import InputError
from harness.core.outcomes import EnvCategory, Outcome
from harness.core.signatures import PatternSet, Severity, anchors, default_catalog, load_catalog

CATALOG = default_catalog()


def test_catalog_is_big_and_covers_the_categories_logs_can_show():
    assert len(CATALOG) >= 60
    seen = {signature.category for signature in CATALOG}
    # every category a log line can show; none is left without a signature
    assert seen == set(EnvCategory)


@pytest.mark.parametrize("signature", CATALOG.signatures, ids=lambda s: s.id)
def test_each_pattern_matches_its_example_and_classifies_it(signature):
    assert signature.pattern.search(signature.example)
    assert signature in CATALOG.match_line(signature.example)
    if signature.severity is Severity.FATAL:
        verdict = classify_case(signature.example)
        assert verdict.outcome is Outcome.ENV_FAULT
        assert verdict.category is signature.category
        # catalog order: the first fatal entry matching a line names it
        assert verdict.evidence[0].signature == signature.id
    else:  # a warning or a wait never decides a run that went on: a passing log with it stays a pass, and names it
        verdict = classify_log([signature.example, "[  PASSED  ] 1 test."])
        assert verdict.outcome is Outcome.PASS
        assert [e.signature for e in verdict.evidence] == [None, signature.id]
        failed = classify_case(signature.example)
        if signature.severity is Severity.WAIT:  # a test that failed still waiting was stopped by the wait
            assert failed.outcome is Outcome.ENV_FAULT and failed.category is signature.category
        else:
            assert failed.outcome is Outcome.FAIL


@pytest.mark.parametrize(
    "line, expected",
    [
        # three wordings of the PCIe hang over UMD's history
        ("Read 0xffffffff from PCIE: you should reset the board.", "umd-pcie-read-all-ones"),
        ("Read 0xffffffff from PCIe: you should reset the board.", "umd-pcie-read-all-ones"),
        ("Read 0xffffffff over PCIe ID 0: the board should be reset.", "umd-pcie-read-all-ones"),
        # hugepage file warning, newer and older form
        (
            "Opened hugepage file has zero size, mapping might've failed due to that. Verify that enough hugepages are provided.",
            "umd-hugepage-zero-size",
        ),
        # KMD minimum version, both messages
        ("KMD version must be at least 2.0.0 to use hugepages with NOC mapping.", "umd-kmd-too-old"),
        # current tt-logger format and the older loguru format
        (
            "2025-11-07 21:59:20.155 | critical |          Always | No chips detected in the cluster (assert.hpp:103)",
            "metal-no-chips",
        ),
        ("2024-12-03 15:18:36.724 | ERROR    | SiliconDriver   - No chips detected in the cluster", "metal-no-chips"),
        (
            "2024-12-03 15:18:36.724 | WARNING  | SiliconDriver   - NumHostMemChannels: 1 used for device_id: 0x401e "
            "less than target: 4. Workload will fail if it exceeds NumHostMemChannels. Increase Number of Hugepages.",
            "umd-host-mem-channels-low",
        ),
        ("Timed out after waiting 1000 ms for ARC to clear trigger bit on device 0", "umd-arc-message-timeout"),
        ("NOC1 is hung on remote device ID 1.", "umd-noc-hung"),
        ("Permission denied (publickey).", "ssh-permission-denied"),
        ("kex_exchange_identification: Connection closed by remote host", "ssh-kex-identification"),
        ("ssh: connect to host 10.0.0.21 port 22: Connection timed out", "ssh-connect-failed"),
        ("curl: (6) Could not resolve host: ghcr.io", "net-resolve-host"),
        ("OSError: [Errno 28] No space left on device", "disk-full"),
    ],
)
def test_old_and_new_wordings_and_log_formats(line, expected):
    assert [s.id for s in CATALOG.match_line(line)][:1] == [expected]


@pytest.mark.parametrize(
    "line",
    [
        "Expected: device output matches reference",
        "2025-11-07 21:59:20.155 | info     |          Device | Opening user mode device driver (tt_cluster.cpp:197)",
        "ETH training timed out after 15000 ms, on eth core 0, (x=25, y=1). Continuing for UBB board.",
        "[  FAILED  ] LayerNormBackwardOpTest.MetalLayerNormBw_OneTile (0 ms)",
        "Connection refused",  # no ssh prefix: any test server's own message, not an SSH fault
    ],
)
def test_generic_lines_match_no_fatal_signature(line):
    assert not [s for s in CATALOG.match_line(line) if s.fatal]


def test_the_6u_eth_training_warning_is_not_the_fatal_form():
    line = "ETH training timed out after 15000 ms, on eth core 0, (x=25, y=1). Continuing for UBB board."
    assert [s.id for s in CATALOG.match_line(line)] == ["umd-eth-training-timeout-ubb"]


def test_a_docker_device_error_for_the_tt_node_is_device_missing_not_generic_docker():
    line = (
        'docker: Error response from daemon: error gathering device information while adding custom device '
        '"/dev/tenstorrent": no such file or directory.'
    )
    matched = [s.id for s in CATALOG.match_line(line)]
    assert matched == ["docker-no-tt-device-node", "docker-custom-device", "docker-daemon-error"]
    assert classify_case(line).category is EnvCategory.DEVICE_MISSING


# ---------------------------------------------------------------------------------------------
# anchors and the prefilter


@pytest.mark.parametrize(
    "pattern, expected",
    [
        (r"No chips detected in the cluster", ("No chips detected in the",)),
        (r"Read 0x[0-9a-fA-F]+ (?:from|over) PCI[eE]", ("Read 0x",)),
        (r"Foo bar|Baz qux", ("Baz qux", "Foo bar")),
        (r"error gathering device information", ("error gathering device information",)),
        (r"x{2}Quux", ("Quux",)),
    ],
)
def test_anchors_are_required_literals(pattern, expected):
    assert anchors(re.compile(pattern)) == expected


@pytest.mark.parametrize("pattern", [r"\d+ ms", r"a|bcde", r"(?i)no chips detected", r"(?:abc)?defg?"])
def test_patterns_without_a_required_literal_are_refused(pattern):
    with pytest.raises(ValueError):
        anchors(re.compile(pattern))


def test_prefilter_finds_exactly_the_lines_the_regexes_match():
    """Brute force against the prefilter on a shuffled mix of every example, runner output and
    noise, including several hits per line and lines split across the buffer."""
    patterns = [(s.id, s.pattern) for s in CATALOG]
    matcher = PatternSet(patterns)
    rng = random.Random(1234)
    pool = [s.example for s in CATALOG] + [
        "2025-11-07 21:59:20.155 | info     |          Device | Opening user mode device driver (tt_cluster.cpp:197)",
        "plain text with device and failed and passed words",
        "NOC0 appears hung: you should reset the board. Read 0xffffffff from PCIE: you should reset the board.",
        "",
    ]
    lines = [rng.choice(pool) for _ in range(3000)]
    buf = ("\n".join(lines) + "\n").encode()
    found = {}
    for start, stop in matcher.candidate_lines(buf, 0, len(buf)):
        line_number = buf.count(b"\n", 0, start)
        text = buf[start:stop].decode()
        found[line_number] = [key for key, _ in matcher.match(text)]
    expected = {
        number: [key for key, pattern in patterns if pattern.search(line)]
        for number, line in enumerate(lines)
        if any(pattern.search(line) for _, pattern in patterns)
    }
    assert {n: keys for n, keys in found.items() if keys} == expected


# ---------------------------------------------------------------------------------------------
# loading


GOOD_ENTRY = """\
  - id: metal-no-chips
    category: device-missing
    severity: fatal
    pattern: 'No chips detected in the cluster'
    source: tt-metal
    example: No chips detected in the cluster
"""


def write(tmp_path, text):
    path = tmp_path / "signatures.yaml"
    path.write_text(text)
    return path


def test_a_minimal_catalog_loads(tmp_path):
    catalog = load_catalog(write(tmp_path, "signatures:\n" + GOOD_ENTRY))
    assert [s.id for s in catalog] == ["metal-no-chips"]
    assert catalog.get("metal-no-chips").where.endswith("signatures.yaml:2")


@pytest.mark.parametrize(
    "replace, value, where, message",
    [
        ("category: device-missing", "category: device-mising", "3:15", "did you mean 'device-missing'"),
        ("severity: fatal", "severity: fatl", "4:15", "must be one of fatal, warning"),
        ("pattern: 'No chips detected in the cluster'", "pattern: 'No chips (detected'", "5:14", "not a valid regex"),
        ("pattern: 'No chips detected in the cluster'", "pattern: '\\d+ ms'", "5:14", "needs a literal"),
        ("pattern: 'No chips detected in the cluster'", "pattern: '(?i)no chips'", "5:14", "case-insensitive"),
        ("example: No chips detected in the cluster", "example: No chip", "7:14", "does not match its own example"),
        ("id: metal-no-chips", "id: Metal_No_Chips", "2:9", "lowercase slug"),
        ("source: tt-metal", "sorce: tt-metal", "6:5", "unknown key 'sorce'"),
        ("source: tt-metal", "source: tt-metal\n    symptom_of: [hugepage]", "7:18", "did you mean 'hugepages'"),
        ("severity: fatal", "severity: warning\n    symptom_of: [hugepages]", "5:17", "symptom_of is for fatal entries"),
        ("severity: fatal", "severity: fatal\n    explains_crash: true", "5:21", "explains_crash is for warnings"),
        ("severity: fatal", "severity: wait\n    cause_follows: true", "5:20", "cause_follows is for fatal entries"),
    ],
)
def test_bad_entries_are_reported_at_their_location(tmp_path, replace, value, where, message):
    path = write(tmp_path, "signatures:\n" + GOOD_ENTRY.replace(replace, value))
    with pytest.raises(InputError) as caught:
        load_catalog(path)
    assert f"{path}:{where}: " in str(caught.value)
    assert message in str(caught.value)


def test_duplicate_ids_and_every_problem_are_reported_together(tmp_path):
    bad = GOOD_ENTRY.replace("severity: fatal", "severity: loud")
    path = write(tmp_path, "signatures:\n" + GOOD_ENTRY + GOOD_ENTRY + bad)
    with pytest.raises(InputError) as caught:
        load_catalog(path)
    problems = [str(p) for p in caught.value.problems]
    assert len(problems) == 2
    assert problems[0].startswith(f"{path}:8:5: duplicate signature id 'metal-no-chips' (first at line 2)")
    assert problems[1].startswith(f"{path}:16:15: severity must be one of")
