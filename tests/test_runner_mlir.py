"""The mlir-order check kind end to end: container, pipeline, dump, culprit pass, A/B rerun.

ttmlir-opt cannot be built here, so harness/lab/standin/ttmlir-opt STANDS IN for it: it moves
one op the way EraseInverseOps does (tt-mlir#6119) unless enable-erase-inverse-ops-pass=false,
and prints an --mlir-print-ir-after-all dump. The input is the real job's input.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.core.outcomes import Outcome
from harness.core.spec import load_job
from harness.execution.runner import HostContext, Runner, eio_disabled
from harness.execution.transport import LocalTransport
from tests.images import build_standin_image

REPO = Path(__file__).resolve().parents[1]
STANDIN = REPO / "harness" / "lab" / "standin" / "ttmlir-opt"
IMAGE = "tt-harness-test/standin-ttmlir:1"

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def ttmlir_image() -> str:
    return build_standin_image(IMAGE, {"ttmlir-opt": STANDIN})


def _run(tmp_path: Path, env: str = "", ab: bool = True):
    real = (REPO / "jobs" / "eraseinverseops-order.yaml").read_text()
    spec = tmp_path / "eio.yaml"
    text = real.replace("    ab: true\n", f"    ab: {str(ab).lower()}\n" + (f"    env: {{{env}}}\n" if env else ""))
    spec.write_text(text)
    shutil.copytree(REPO / "jobs" / "inputs", tmp_path / "inputs")  # a copy: a link out of the folder is refused
    job = load_job(spec)
    runner = Runner(job, LocalTransport(), HostContext("standin"), IMAGE, "m" + tmp_path.name[-6:], tmp_path / "logs")
    (case,) = runner.run_check(job.check("resnet50-layer4-op-order"))
    return case


def test_moved_op_is_a_real_failure_naming_the_pass_and_confirmed_by_ab(ttmlir_image, tmp_path):
    case = _run(tmp_path)
    assert case.outcome is Outcome.FAIL
    assert "ttir-erase-inverse-ops" in case.verdict.message
    assert "confirmed by A/B: with enable-erase-inverse-ops-pass=false the order holds" in case.verdict.message
    (evidence,) = case.verdict.evidence
    assert evidence.signature == "mlir-order" and '"ttir.transpose"' in evidence.text


def test_without_ab_no_rerun_happens(ttmlir_image, tmp_path):
    case = _run(tmp_path, ab=False)
    assert case.outcome is Outcome.FAIL and "A/B" not in case.verdict.message
    assert not list((tmp_path / "logs").rglob("eio-off"))


def test_an_ab_rerun_that_writes_no_output_is_a_note_not_a_crash(ttmlir_image, tmp_path):
    """Regression: the control run exiting 0 without output raised an artifact error out of
    `harness run` (traceback, exit 1, no report)."""
    case = _run(tmp_path, env='STANDIN_AB_NO_OUTPUT: "1"')
    assert case.outcome is Outcome.FAIL and "ttir-erase-inverse-ops" in case.verdict.message
    assert "A/B rerun with enable-erase-inverse-ops-pass=false wrote no output" in case.verdict.message


def test_compiler_crash_is_a_real_failure(ttmlir_image, tmp_path):
    case = _run(tmp_path, env='STANDIN_CRASH: "1"')
    assert case.outcome is Outcome.FAIL
    assert "134" in case.verdict.message


def test_eio_option_is_added_to_the_pipeline_options():
    assert eio_disabled(["ttmlir-opt", "--ttir-to-ttnn-runtime-pipeline", "x.mlir"]) == (
        "ttmlir-opt", "--ttir-to-ttnn-runtime-pipeline=enable-erase-inverse-ops-pass=false", "x.mlir",
    )
    assert eio_disabled(['--ttir-to-ttnn-runtime-pipeline="system-desc-path=/s.ttsys enable-erase-inverse-ops-pass=true"']) == (
        "--ttir-to-ttnn-runtime-pipeline=system-desc-path=/s.ttsys enable-erase-inverse-ops-pass=false",
    )
