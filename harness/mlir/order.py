"""The op-order check: within each block, indexed ops keep non-decreasing index order.

Equal indices are fine (all aten ops of one FX node share its index). A *violation* is an op
whose index is lower than that of the previous indexed op of its block. As a hint to what
actually moved, the check also gives the smallest set of ops whose removal leaves every block
in order: the complement of a longest non-decreasing subsequence.
"""

from __future__ import annotations

import operator
import re
from array import array
from bisect import bisect_right
from dataclasses import dataclass
from itertools import islice
from typing import Sequence

from harness.mlir.reader import IndexedOp, ModuleOps


NO_INDEX_HINT = "no op carries an index location: did the pipeline run without --mlir-print-debuginfo?"
_LONG_INDEX = re.compile(rb"(?:DEBUG\|)(-?\d{19,})\|")


def no_index_message(path) -> str:
    """Why no op carries an index: an index too long for the checker (it keeps int64s), named
    with its line, or the usual hint."""
    try:
        with open(path, "rb") as handle:
            for number, line in enumerate(iter(lambda: handle.readline(1 << 20), b""), 1):
                found = _LONG_INDEX.search(line)
                if found:
                    digits = len(found.group(1).lstrip(b"-"))
                    return f"line {number}: an op index of {digits} digits; indices of more than 18 digits are not supported"
    except OSError:
        pass
    return NO_INDEX_HINT


@dataclass(frozen=True)
class Violation:
    op: IndexedOp
    previous: IndexedOp  # the indexed op just before it in the same block
    function: str | None

    @property
    def where(self) -> str:
        return f" in @{self.function}" if self.function else ""

    def describe(self) -> str:
        return (
            f'op "{self.op.op}" (index {self.op.index}) comes after "{self.previous.op}" '
            f"(index {self.previous.index}, line {self.previous.line}){self.where}"
        )

    def to_json(self) -> dict:
        return {
            "line": self.op.line,
            "op": self.op.op,
            "index": self.op.index,
            "previous_index": self.previous.index,
            "previous_line": self.previous.line,
            "function": self.function,
        }


@dataclass(frozen=True)
class OrderReport:
    path: str
    ops: int
    indexed: int
    violations: tuple[Violation, ...]
    moved: tuple[IndexedOp, ...]  # in file order

    @property
    def ok(self) -> bool:
        return not self.violations

    def to_json(self) -> dict:
        return {
            "file": self.path,
            "ok": self.ok,
            "ops": self.ops,
            "indexed": self.indexed,
            "violations": [violation.to_json() for violation in self.violations],
            "moved": [op.line for op in self.moved],
        }


def check_order(module: ModuleOps) -> OrderReport:
    violations: list[Violation] = []
    moved: list[IndexedOp] = []
    names = module.op_names
    for block in module.blocks:
        indices = block.indices
        if not any(map(operator.gt, indices, islice(indices, 1, None))):
            continue  # the common case, at C speed

        def op_at(position: int, records=block.records) -> IndexedOp:
            at = 4 * position
            return IndexedOp(records[at], records[at + 1], names[records[at + 2]], records[at + 3])

        for position, (before, index) in enumerate(zip(indices, islice(indices, 1, None)), 1):
            if index < before:
                violations.append(Violation(op_at(position), op_at(position - 1), block.function))
        moved.extend(op_at(position) for position in moved_positions(indices))
    violations.sort(key=lambda v: v.op.line)
    moved.sort(key=lambda op: op.line)
    return OrderReport(module.path, module.ops, module.indexed, tuple(violations), tuple(moved))


def moved_positions(values: Sequence[int]) -> list[int]:
    """Positions outside one longest non-decreasing subsequence of ``values``, ascending.
    Patience sorting, O(n log n): ``tails[k]`` is the smallest value ending a run of k+1.
    Machine-int arrays keep a million-op block to a few bytes per op."""
    tails = array("q")
    tail_at = array("q")  # position of tails[k]
    parent = array("q", [-1]) * len(values)
    for position, value in enumerate(values):
        k = bisect_right(tails, value)
        if k:
            parent[position] = tail_at[k - 1]
        if k == len(tails):
            tails.append(value)
            tail_at.append(position)
        else:
            tails[k] = value
            tail_at[k] = position
    kept = bytearray(len(values))
    position = tail_at[-1] if tail_at else -1
    while position != -1:
        kept[position] = 1
        position = parent[position]
    return [p for p, keep in enumerate(kept) if not keep]
