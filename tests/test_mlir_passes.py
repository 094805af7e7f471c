"""The culprit pass, from a --mlir-print-ir-after-all dump."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.errors import InputError
from harness.mlir.passes import find_culprit

DUMP = Path(__file__).parent / "data" / "mlir" / "eio_after_all.mlir.txt"
TEXT = DUMP.read_text()
LINES = TEXT.split("\n")


def line_of(fragment: str, start: int = 1) -> int:
    return next(n for n, line in enumerate(LINES, 1) if n >= start and fragment in line)


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "dump.txt"
    path.write_text(text)
    return str(path)


def test_the_erase_inverse_ops_dump_is_named_with_the_op_it_moved():
    report = find_culprit(str(DUMP))
    culprit = report.culprit
    assert culprit is not None
    header = line_of("IR Dump After TTIREraseInverseOps (ttir-erase-inverse-ops)")
    assert (culprit.name, culprit.arg, culprit.line) == ("TTIREraseInverseOps", "ttir-erase-inverse-ops", header)
    assert culprit.label == "ttir-erase-inverse-ops (TTIREraseInverseOps)"
    assert report.dumps == 6  # the CSE dump after it is never read
    permute, reshape = line_of('"ttir.permute"', header), line_of('"ttir.reshape"', header)
    assert [(op.line, op.op, op.index) for op in culprit.report.moved] == [(permute, "ttir.permute", 23)]
    assert [v.to_json() for v in culprit.report.violations] == [
        {"line": reshape, "op": "ttir.reshape", "index": 18, "previous_index": 23, "previous_line": permute, "function": "main"}
    ]
    assert report.to_json()["culprit"]["moved"] == [permute]


def test_a_failed_pass_header(tmp_path):
    text = TEXT.replace("After TTIREraseInverseOps (ttir", "After TTIREraseInverseOps Failed (ttir")
    culprit = find_culprit(write(tmp_path, text)).culprit
    assert culprit is not None and (culprit.name, culprit.arg) == ("TTIREraseInverseOps", "ttir-erase-inverse-ops")


def test_every_dump_in_order_and_dumps_reusing_alias_names(tmp_path):
    # the dumps before EraseInverseOps: alias and inline forms, `#loc3` defined in each of them
    before = TEXT[: TEXT.index("// -----// IR Dump After TTIREraseInverseOps")]
    assert before.count("#loc3 = loc(") == 3
    report = find_culprit(write(tmp_path, before))
    assert report.ok and report.culprit is None and report.dumps == 5


def test_before_dumps_are_skipped(tmp_path):
    broken = TEXT[TEXT.index("// -----// IR Dump After TTIREraseInverseOps") :]
    broken = broken[: broken.index("// -----// IR Dump After CSE")]
    before_header = "// -----// IR Dump Before TTIREraseInverseOps (ttir-erase-inverse-ops) //----- //"
    text = broken.replace("IR Dump After TTIREraseInverseOps", "IR Dump Before TTIREraseInverseOps")
    assert before_header in text
    in_order = TEXT[TEXT.index("// -----// IR Dump After TTIRExplicateTMs") : TEXT.index("// -----// IR Dump After TTIREraseInverseOps")]
    report = find_culprit(write(tmp_path, text + in_order))
    assert report.ok and report.dumps == 1


def test_a_dump_scoped_to_a_function_names_its_pass(tmp_path):
    # the canonicalize dump prints only `func.func @main` (a nested pass manager), inline locations
    header = line_of("('func.func' operation: @main)")
    relu, reshape = line_of('"ttir.relu"', header), line_of('"ttir.reshape"', header)
    lines = list(LINES)
    lines[relu - 1], lines[reshape - 1] = lines[reshape - 1], lines[relu - 1]
    report = find_culprit(write(tmp_path, "\n".join(lines)))
    assert report.culprit is not None and report.dumps == 2
    assert (report.culprit.name, report.culprit.arg, report.culprit.line) == ("Canonicalizer", "canonicalize", header)
    assert [(v.op.line, v.op.index, v.function) for v in report.culprit.report.violations] == [(reshape, 16, "main")]


def test_the_dump_is_checked_as_it_ends(tmp_path):
    # what follows the culprit is never read: a broken tail does not matter
    cut = TEXT.index("// -----// IR Dump After CSE")
    report = find_culprit(write(tmp_path, TEXT[:cut] + "// -----// IR Dump After CSE (cse) //----- //\n}}} garbage"))
    assert report.culprit is not None and report.culprit.arg == "ttir-erase-inverse-ops"


def test_a_broken_dump_before_the_culprit_is_an_input_error_at_its_line(tmp_path):
    text = TEXT.replace("  } loc(#loc)\n} loc(#loc)", "  } loc(#loc)\n} loc(#loc))", 1)
    with pytest.raises(InputError) as raised:
        find_culprit(write(tmp_path, text))
    problem = raised.value.problems[0]
    assert (problem.line, problem.message) == (LINES.index("} loc(#loc)") + 1, "`)` closes nothing")


@pytest.mark.parametrize(
    "text, message",
    [
        ("module {\n} loc(unknown)\n", "no `// -----// IR Dump After ... //----- //` header"),
        ("// -----// IR Dump Before Canonicalizer (canonicalize) //----- //\nmodule {\n}\n", "no `IR Dump After` dump"),
        (
            "// -----// IR Dump After Canonicalizer (canonicalize) //----- //\nmodule {\n} loc(unknown)\n",
            "no op carries an index location",
        ),
    ],
)
def test_dumps_that_cannot_name_a_culprit(tmp_path, text, message):
    with pytest.raises(InputError, match=message):
        find_culprit(write(tmp_path, text))
