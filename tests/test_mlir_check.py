"""judge_pipeline_output: the verdict the runner records for a pipeline's output IR."""

from __future__ import annotations

from pathlib import Path

from harness.core.outcomes import HarnessErrorKind, Outcome
from harness.mlir.check import judge_pipeline_output
from tests.paths import TTMLIR_INPUTS

DATA = Path(__file__).parent / "data" / "mlir"
DUMP = DATA / "eio_after_all.mlir.txt"


def broken_output(tmp_path: Path) -> Path:
    """The TTNN fixture with its relu (index 17) moved above the add (index 15)."""
    lines = (DATA / "ttnn_resnet_block.mlir").read_text().split("\n")
    add = next(n for n, line in enumerate(lines) if '"ttnn.add"' in line)
    relu = next(n for n, line in enumerate(lines) if '"ttnn.relu"' in line)
    lines[add], lines[relu] = lines[relu], lines[add]
    path = tmp_path / "out.mlir"
    path.write_text("\n".join(lines))
    return path


def test_pass():
    verdict = judge_pipeline_output(DATA / "ttnn_resnet_block.mlir")
    assert verdict.outcome is Outcome.PASS and verdict.category is None
    assert verdict.message == "op order kept: 12 indexed ops in order"


def test_fail_with_one_evidence_per_violation(tmp_path):
    path = broken_output(tmp_path)
    verdict = judge_pipeline_output(path)
    assert verdict.outcome is Outcome.FAIL
    # relu 17 (line 27), deallocate 15 (line 28: the add's), add 15 (line 29), deallocate 17
    assert [(e.line, e.signature) for e in verdict.evidence] == [(28, "mlir-order")]
    assert verdict.evidence[0].text == 'op "ttnn.deallocate" (index 15) comes after "ttnn.relu" (index 17, line 27) in @main'
    assert verdict.message == "op order broken: 1 op(s) with a lower index than the op before them; 1 op(s) moved"


def test_fail_names_the_culprit_pass_from_the_dump(tmp_path):
    verdict = judge_pipeline_output(broken_output(tmp_path), dump_path=DUMP)
    assert verdict.outcome is Outcome.FAIL
    assert "first broken after pass ttir-erase-inverse-ops (TTIREraseInverseOps) (1 op(s) moved" in verdict.message


def test_a_dump_that_cannot_tell_keeps_the_failure(tmp_path):
    verdict = judge_pipeline_output(broken_output(tmp_path), dump_path=tmp_path / "missing.txt")
    assert verdict.outcome is Outcome.FAIL
    assert "culprit pass unknown" in verdict.message and "cannot read file" in verdict.message


def test_fused_policy_is_passed_through(tmp_path):
    assert judge_pipeline_output(DATA / "ttnn_resnet_block.mlir", fused="max").outcome is Outcome.FAIL
    verdict = judge_pipeline_output(DATA / "ttnn_resnet_block.mlir", fused="median")
    assert (verdict.outcome, verdict.category) == (Outcome.ERROR, HarnessErrorKind.SPEC)


def test_artifact_errors(tmp_path):
    missing = judge_pipeline_output(tmp_path / "missing.mlir")
    assert (missing.outcome, missing.category) == (Outcome.ERROR, HarnessErrorKind.ARTIFACT)
    assert "cannot read file" in missing.message
    no_index = judge_pipeline_output(TTMLIR_INPUTS / "resnet50_last_module.mlir")
    assert (no_index.outcome, no_index.category) == (Outcome.ERROR, HarnessErrorKind.ARTIFACT)
    assert "--mlir-print-debuginfo" in no_index.message
    broken = tmp_path / "broken.mlir"
    broken.write_text('"ttnn.add"() : () -> () loc("1|a"\n')
    unparseable = judge_pipeline_output(broken)
    assert (unparseable.outcome, unparseable.category) == (Outcome.ERROR, HarnessErrorKind.ARTIFACT)
    assert [e.line for e in unparseable.evidence] == [1]
