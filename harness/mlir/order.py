"""The op-order check: within each block, indexed ops keep non-decreasing index order.

Equal indices are fine (all aten ops of one FX node share its index). A *violation* is an op
whose index is lower than that of the previous indexed op of its block. As a hint to what
actually moved, the check also gives the smallest set of ops whose removal leaves every block
in order: the complement of a longest non-decreasing subsequence.
"""

from __future__ import annotations

import operator
from bisect import bisect_right
from dataclasses import dataclass
from itertools import islice
from typing import Sequence

from harness.mlir.reader import IndexedOp, ModuleOps


NO_INDEX_HINT = "no op carries an index location: did the pipeline run without --mlir-print-debuginfo?"


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
    for block in module.blocks:
        indices = block.indices
        if not any(map(operator.gt, indices, islice(indices, 1, None))):
            continue  # the common case, at C speed
        ops = list(module.indexed_ops(block))
        for previous, op in zip(ops, ops[1:]):
            if op.index < previous.index:
                violations.append(Violation(op, previous, block.function))
        moved.extend(ops[i] for i in moved_positions(indices))
    violations.sort(key=lambda v: v.op.line)
    moved.sort(key=lambda op: op.line)
    return OrderReport(module.path, module.ops, module.indexed, tuple(violations), tuple(moved))


def moved_positions(values: Sequence[int]) -> list[int]:
    """Positions outside one longest non-decreasing subsequence of ``values``, ascending.
    Patience sorting, O(n log n): ``tails[k]`` is the smallest value ending a run of k+1."""
    tails: list[int] = []
    tail_at: list[int] = []  # position of tails[k]
    parent = [-1] * len(values)
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
    kept = set()
    position = tail_at[-1] if tail_at else -1
    while position != -1:
        kept.add(position)
        position = parent[position]
    return [p for p in range(len(values)) if p not in kept]
