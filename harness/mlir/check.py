"""The runner's entry point: judge a pipeline's output IR by its op order."""

from __future__ import annotations

from pathlib import Path

from harness.core.errors import InputError
from harness.core.outcomes import Evidence, HarnessErrorKind, Outcome, Verdict
from harness.mlir.locations import FusedPolicy
from harness.mlir.order import check_order, no_index_message
from harness.mlir.passes import find_culprit
from harness.mlir.reader import read_module

SIGNATURE = "mlir-order"


def judge_pipeline_output(
    output_path: str | Path, dump_path: str | Path | None = None, fused: FusedPolicy | str = FusedPolicy.MIN
) -> Verdict:
    """PASS when every block of ``output_path`` keeps its ops in index order; FAIL with one
    evidence item per violation (and, given an ``--mlir-print-ir-after-all`` dump, the pass
    that first broke the order in the message); ERROR(artifact) when the output can't be read
    or carries no index location."""
    try:
        policy = FusedPolicy(fused)
    except ValueError:
        return Verdict.error(HarnessErrorKind.SPEC, f"unknown fused-location policy {fused!r} (min, max or skip)")
    try:
        report = check_order(read_module(str(output_path), policy))
    except InputError as exc:
        return Verdict.error(HarnessErrorKind.ARTIFACT, f"cannot check op order: {exc.problems[0]}", _evidence(exc))
    if not report.indexed:
        return Verdict.error(HarnessErrorKind.ARTIFACT, f"{output_path}: {no_index_message(output_path)}")
    if report.ok:
        return Verdict(Outcome.PASS, message=f"op order kept: {report.indexed} indexed ops in order")
    message = (
        f"op order broken: {len(report.violations)} op(s) with a lower index than the op before them; "
        f"{len(report.moved)} op(s) moved"
    )
    if dump_path is not None:
        message += "; " + _culprit(str(dump_path), policy)
    evidence = [Evidence(v.op.line, v.describe(), signature=SIGNATURE) for v in report.violations]
    return Verdict(Outcome.FAIL, message=message, evidence=tuple(evidence))


def _culprit(dump_path: str, policy: FusedPolicy) -> str:
    try:
        passes = find_culprit(dump_path, policy)
    except InputError as exc:
        return f"culprit pass unknown ({exc.problems[0]})"
    if passes.culprit is None:
        return f"culprit pass unknown (all {passes.dumps} dumps of {dump_path} are in order)"
    culprit = passes.culprit
    return f"first broken after pass {culprit.label} ({len(culprit.report.moved)} op(s) moved, {dump_path}:{culprit.line})"


def _evidence(exc: InputError) -> list[Evidence]:
    return [Evidence(problem.line, str(problem)) for problem in exc.problems]


def ab_note(exit_status: int | None, control: Verdict | None = None) -> str | None:
    """What the A/B rerun (EraseInverseOps disabled) says about a reordering; ``None`` while
    its output still has to be judged (it exited 0 and ``control`` is not given yet)."""
    if exit_status != 0:
        return f"A/B rerun with enable-erase-inverse-ops-pass=false did not complete (exit {exit_status})"
    if control is None:
        return None
    if control.outcome is Outcome.PASS:
        return "confirmed by A/B: with enable-erase-inverse-ops-pass=false the order holds"
    return "not EraseInverseOps alone: the order breaks with enable-erase-inverse-ops-pass=false too"
