"""The order check: violations against the previous indexed op, and the smallest moved set."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from harness.mlir.order import check_order, moved_positions
from harness.mlir.reader import ModuleOps, ModuleReader


def module_of(*functions: list[int]) -> ModuleOps:
    """One function per list, one op per index (`loc("DEBUG|i|...")`), line by line."""
    lines = ["module {"]
    for n, indices in enumerate(functions):
        lines.append(f"  func.func @f{n}() {{")
        lines += [f'    "ttnn.op{i}"() : () -> () loc("DEBUG|{i}|m[m]|f.py:1|forward|1|aten__x")' for i in indices]
        lines.append("  } loc(unknown)")
    lines.append("} loc(unknown)")
    reader = ModuleReader("m.mlir")
    reader.feed(lines)
    return reader.finish()


def test_a_violation_is_against_the_previous_indexed_op_not_the_running_maximum():
    report = check_order(module_of([1, 5, 2, 3]))
    assert [(v.op.index, v.previous.index, v.op.line, v.previous.line) for v in report.violations] == [(2, 5, 5, 4)]
    assert [(op.index, op.line) for op in report.moved] == [(5, 4)]  # the op that jumped ahead
    assert report.violations[0].describe() == 'op "ttnn.op2" (index 2) comes after "ttnn.op5" (index 5, line 4) in @f0'


def test_the_issue_example_blames_the_permute():
    # tt-mlir#6119: batch_norm 15, permute 23, reshape 18 after EraseInverseOps
    report = check_order(module_of([13, 15, 23, 18, 23]))
    assert [v.op.index for v in report.violations] == [18]
    assert [op.index for op in report.moved] == [23]


def test_functions_are_checked_separately_and_equal_indices_are_fine():
    report = check_order(module_of([7, 7, 8], [1, 1, 2]))
    assert report.ok and report.indexed == 6 and report.ops == 2 + 6 + 1
    report = check_order(module_of([7, 8], [3, 1]))
    assert [(v.function, v.op.index) for v in report.violations] == [("f1", 1)]


def test_report_json_has_exactly_the_documented_fields():
    report = check_order(module_of([2, 1]))
    assert report.to_json() == {
        "file": "m.mlir",
        "ok": False,
        "ops": 4,
        "indexed": 2,
        "violations": [
            {"line": 4, "op": "ttnn.op1", "index": 1, "previous_index": 2, "previous_line": 3, "function": "f0"}
        ],
        "moved": [3],
    }


def _longest_non_decreasing(values: list[int]) -> int:
    """Quadratic reference: length of a longest non-decreasing subsequence."""
    best = [1] * len(values)
    for i in range(len(values)):
        for j in range(i):
            if values[j] <= values[i]:
                best[i] = max(best[i], best[j] + 1)
    return max(best, default=0)


@given(st.lists(st.integers(min_value=0, max_value=12), max_size=40))
def test_moved_is_the_complement_of_a_longest_non_decreasing_subsequence(values):
    moved = moved_positions(values)
    kept = [v for p, v in enumerate(values) if p not in set(moved)]
    assert moved == sorted(set(moved))
    assert all(a <= b for a, b in zip(kept, kept[1:]))
    assert len(kept) == _longest_non_decreasing(values)


@given(st.lists(st.integers(min_value=0, max_value=12), min_size=1, max_size=30))
def test_violations_are_exactly_the_descents(values):
    report = check_order(module_of(values))
    descents = [b for a, b in zip(values, values[1:]) if b < a]
    assert [v.op.index for v in report.violations] == descents
    assert report.ok is (not descents) and (not report.moved) is (not descents)
