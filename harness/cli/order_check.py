"""``harness order-check``: are the ops of a tt-mlir output still in their original order?"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from harness.cli.app import app
from harness.cli.common import fail_input, print_json, usage_error
from harness.core.errors import InputError
from harness.core.outcomes import EXIT_FAILURE, EXIT_OK
from harness.mlir.locations import FusedPolicy
from harness.mlir.order import OrderReport, check_order, no_index_message
from harness.mlir.passes import PassesReport, find_culprit
from harness.mlir.reader import read_module

_SHOWN = 20  # moved ops listed in human output; --json lists them all


@app.command("order-check")
def order_check(
    file: Optional[Path] = typer.Argument(None, help="MLIR printed with --mlir-print-debuginfo (e.g. ttmlir-opt's output)."),
    passes: Optional[Path] = typer.Option(
        None, "--passes", help="--mlir-print-ir-after-all output: name the first pass that breaks the order."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of diagnostics."),
    fused: FusedPolicy = typer.Option(
        FusedPolicy.MIN, "--fused", help="Index of a fused location: the smallest of its parts, the largest, or skip the op."
    ),
) -> None:
    """Check that ops keep non-decreasing `index|...` location order within each block.

    Exit 0 in order, 1 out of order, 2 unreadable input or no index location."""
    if (file is None) == (passes is None):
        raise usage_error("order-check: give either an MLIR FILE or --passes DUMP")
    try:
        if file is not None:
            report = check_order(read_module(str(file), fused))
            if not report.indexed:
                raise InputError.at(str(file), 1, 1, no_index_message(file))
            _print_report(report, as_json)
            ok = report.ok
        else:
            passes_report = find_culprit(str(passes), fused)
            _print_passes(passes_report, as_json)
            ok = passes_report.ok
    except InputError as exc:
        raise fail_input(exc) from None
    raise typer.Exit(EXIT_OK if ok else EXIT_FAILURE)


def _print_report(report: OrderReport, as_json: bool) -> None:
    if as_json:
        print_json(report.to_json())
        return
    path = report.path
    for violation in report.violations:
        op, previous = violation.op, violation.previous
        typer.echo(
            f"{path}:{op.line}:{op.col}: error: op order broken{violation.where}: "
            f'"{op.op}" has index {op.index}, lower than index {previous.index} of the op before it (line {previous.line})'
        )
        typer.echo(f'{path}:{previous.line}:{previous.col}: note: the op before it: "{previous.op}" (index {previous.index})')
    if report.ok:
        typer.echo(f"{path}: in order: {report.indexed} indexed ops ({report.ops} ops)")
    else:
        typer.echo(
            f"{path}: {len(report.violations)} violation(s) among {report.indexed} indexed ops ({report.ops} ops); "
            f"smallest set of moved ops: {_lines(report)}"
        )


def _print_passes(report: PassesReport, as_json: bool) -> None:
    if as_json:
        print_json(report.to_json())
        return
    culprit = report.culprit
    if culprit is None:
        typer.echo(f"{report.path}: in order after every pass ({report.dumps} dumps)")
        return
    moved = culprit.report.moved
    typer.echo(
        f"{report.path}:{culprit.line}:1: error: op order first breaks after pass {culprit.label}: "
        f"it moved {len(moved)} op(s)"
    )
    for op in moved[:_SHOWN]:
        typer.echo(f'{report.path}:{op.line}:{op.col}: note: moved: "{op.op}" (index {op.index})')
    if len(moved) > _SHOWN:
        typer.echo(f"{report.path}: note: and {len(moved) - _SHOWN} more moved op(s)")
    _print_report(culprit.report, as_json=False)


def _lines(report: OrderReport) -> str:
    lines = [str(op.line) for op in report.moved[:_SHOWN]]
    more = f" and {len(report.moved) - _SHOWN} more" if len(report.moved) > _SHOWN else ""
    return f"{len(report.moved)} op(s) at line(s) {', '.join(lines)}{more}"
