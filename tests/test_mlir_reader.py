"""The MLIR location reader on real tt-mlir inputs and on variants derived from them."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

import harness.mlir.reader as reader_module
from harness.core.errors import InputError
from harness.mlir.locations import FusedPolicy
from harness.mlir.order import check_order
from harness.mlir.reader import OVERLONG, ModuleOps, ModuleReader, iter_lines, read_module
from tests.paths import TTMLIR_INPUTS

DATA = Path(__file__).parent / "data" / "mlir"


def read(text: str, fused: FusedPolicy = FusedPolicy.MIN) -> ModuleOps:
    reader = ModuleReader("t.mlir", fused)
    reader.feed(text.split("\n"))
    return reader.finish()


def indexed(module: ModuleOps) -> list[tuple[int, str, int, str | None]]:
    """(line, op, index, function) of every indexed op, block by block."""
    return [(op.line, op.op, op.index, block.function) for block in module.blocks for op in module.indexed_ops(block)]


def op_lines(text: str, pattern: str = r"\s*%\d+ = ") -> list[int]:
    return [n for n, line in enumerate(text.split("\n"), 1) if re.match(pattern, line)]


# -- the real inputs, as they are ---------------------------------------------------------------


@pytest.mark.parametrize(
    "name, ops",
    [
        # every op of the module, func and the ops inside, counted once
        ("resnet50_last_module.mlir", 24 + 3),
        ("multiple_add_with_loc.mlir", 3 + 3),
        ("input_layout_loc_override.mlir", 1 + 3),
        ("resnet_erase_redundant_shapes.mlir", 9 + 3),
    ],
)
def test_real_inputs_are_walked_op_by_op_and_carry_no_index(name, ops):
    module = read_module(str(TTMLIR_INPUTS / name))
    assert module.ops == ops
    assert module.indexed == 0  # tt-mlir's own tests name ops without tt-xla's `index|`


# -- resnet50_last_module.mlir: aliases after the module ----------------------------------------

RESNET = (TTMLIR_INPUTS / "resnet50_last_module.mlir").read_text()
RESNET_ALIAS = re.compile(r'^#loc(\d+) = loc\("([^"]*)"\)$', re.M)


def with_indices(text: str, prefix: str = "DEBUG|", index=lambda n: n) -> str:
    """Give each `#locN = loc("name")` the tt-xla form `index|modules|file:line|func|line|name`."""
    return RESNET_ALIAS.sub(
        lambda m: f'#loc{m[1]} = loc("{prefix}{index(int(m[1]))}|ResNetForImageClassification[resnet]|'
        f"/models/resnet/modeling_resnet.py:52|forward|{m[1]}|{m[2]}\")",
        text,
    )


def inline_aliases(text: str) -> str:
    """The same module as --mlir-print-local-scope prints it: no `#locN` left."""
    definitions = dict(re.findall(r"^(#loc\d*) = (loc\(.*\))$", text, re.M))
    body = re.sub(r"^#loc\d* = loc\(.*\)\n?", "", text, flags=re.M)
    return re.sub(r"loc\((#loc\d*)\)", lambda m: definitions[m[1]], body)


def aliases_first_shuffled(text: str, seed: int) -> str:
    definitions = re.findall(r"^#loc\d* = loc\(.*\)$", text, re.M)
    random.Random(seed).shuffle(definitions)
    body = re.sub(r"^#loc\d* = loc\(.*\)\n?", "", text, flags=re.M)
    return "\n".join(definitions) + "\n" + body


RESNET_OP_LINES = op_lines(RESNET)


@pytest.mark.parametrize(
    "variant",
    [
        pytest.param(lambda t: t, id="aliases-after-module"),
        pytest.param(inline_aliases, id="inline"),
        pytest.param(lambda t: aliases_first_shuffled(t, 1), id="aliases-before-module-shuffled"),
        pytest.param(lambda t: aliases_first_shuffled(t, 2), id="aliases-before-module-shuffled-2"),
    ],
)
@pytest.mark.parametrize("prefix", ["DEBUG|", ""])
def test_resnet_indices_come_back_in_every_print_form(variant, prefix):
    text = variant(with_indices(RESNET, prefix))
    module = read(text)
    expected_lines = op_lines(text)
    assert indexed(module) == [
        (line, op, n, "forward")
        for n, (line, op) in enumerate(
            ((line, re.search(r'"(ttir\.\w+)"', text.split("\n")[line - 1])[1]) for line in expected_lines), 1
        )
    ]
    assert check_order(module).ok


def test_a_moved_op_is_a_violation_at_the_op_after_which_it_now_sits():
    lines = with_indices(RESNET).split("\n")
    conv3, transpose1 = RESNET_OP_LINES[11], RESNET_OP_LINES[12]  # %11 (index 12), %12 (index 13)
    lines[conv3 - 1], lines[transpose1 - 1] = lines[transpose1 - 1], lines[conv3 - 1]
    report = check_order(read("\n".join(lines)))
    assert [v.to_json() for v in report.violations] == [
        {
            "line": transpose1,
            "op": "ttir.conv2d",
            "index": 12,
            "previous_index": 13,
            "previous_line": conv3,
            "function": "forward",
        }
    ]
    assert len(report.moved) == 1 and report.moved[0].index in (12, 13)


def test_equal_indices_are_in_order_and_minus_one_is_not_checked():
    # all aten ops of one FX node share its index; `-1` is tt-xla's "unknown"
    text = with_indices(RESNET, index=lambda n: -1 if n % 5 == 0 else n // 3)
    module = read(text)
    assert module.indexed == 24 - 4
    assert check_order(module).ok
    shuffled = with_indices(RESNET, index=lambda n: 99 if n == 2 else n // 3)
    report = check_order(read(shuffled))
    assert [(v.op.index, v.previous.index) for v in report.violations] == [(1, 99)]


# -- multiple_add_with_loc.mlir: name -> alias -> name chains, colons in file names ----------------

ADD = (TTMLIR_INPUTS / "multiple_add_with_loc.mlir").read_text()


def add_with_indices(indices: tuple[int, int, int]) -> str:
    """`#loc5 = loc("add_1_0"(#loc1))`: give #loc1..#loc3 a name with an index over their file loc."""
    text = ADD
    for n, index in zip((1, 2, 3), indices):
        text = re.sub(
            rf'^#loc{n} = loc\(("test_ops\.py:17_0_0":0:\d)\)$',
            lambda m: f'#loc{n} = loc("{index}|/test_ops.py:17|forward|17|aten__add"({m[1]}))',
            text,
            flags=re.M,
        )
    return text


def test_the_index_is_found_through_a_name_without_one_and_its_alias_child():
    module = read(add_with_indices((1, 2, 3)))
    assert [(op, index) for _, op, index, _ in indexed(module)] == [("ttir.add", 1), ("ttir.add", 2), ("ttir.add", 3)]
    assert [line for line, *_ in indexed(module)] == op_lines(ADD)


def test_argument_locations_are_not_op_locations():
    # an index in every argument location must change nothing
    text = add_with_indices((1, 2, 3)).replace('loc("test_ops.py:17_0_0":0:0), %', 'loc("0|arg"), %')
    assert text.count('loc("0|arg")') == 2
    assert [index for *_, index, _ in indexed(read(text))] == [1, 2, 3]


def test_violations_in_multiple_add():
    report = check_order(read(add_with_indices((3, 1, 2))))
    lines = op_lines(ADD)
    assert [(v.op.line, v.op.index, v.previous.line, v.previous.index) for v in report.violations] == [(lines[1], 1, lines[0], 3)]
    assert [op.line for op in report.moved] == [lines[0]]


# -- input_layout_loc_override.mlir: CHECK comments, u32 lines, file locs are not names -----------

LAYOUT = (TTMLIR_INPUTS / "input_layout_loc_override.mlir").read_text()


def test_locations_in_comments_are_ignored_and_file_locations_carry_no_index():
    text = LAYOUT.replace('#loc2 = loc("matmul_1"(#loc1))', '#loc2 = loc("DEBUG|7|matmul_1"(#loc1))')
    # a file location whose file name looks indexed is still a file location
    text = text.replace('#loc = loc("Matmul":4294967295:0)', '#loc = loc("DEBUG|3|Matmul":4294967295:0)')
    module = read(text)
    assert indexed(module) == [(op_lines(text, r"\s*%1 = ")[0], "ttir.matmul", 7, "forward")]


# -- resnet_erase_redundant_shapes.mlir: ops with attribute aliases, inline locations added -------


def test_inline_locations_appended_to_an_eio_test_input():
    source = (TTMLIR_INPUTS / "resnet_erase_redundant_shapes.mlir").read_text().split("\n")
    ops = [n for n, line in enumerate(source) if re.match(r"\s*%\d+ = ", line)]
    order = [1, 2, 2, 3, 4, 5, 6, 6, 7]
    for n, index in zip(ops, order):
        source[n] += f' loc("DEBUG|{index}|ResNet[r]|m.py:1|forward|{index}|aten__x"("m.py":{index}:0))'
    module = read("\n".join(source))
    assert [index for *_, index, _ in indexed(module)] == order
    assert {function for *_, function in indexed(module)} == {"resnet_erase_redundant_reshapes"}
    source[ops[3]], source[ops[6]] = source[ops[6]], source[ops[3]]
    report = check_order(read("\n".join(source)))
    assert [(v.op.index, v.previous.index) for v in report.violations] == [(4, 6), (3, 5)]
    assert [op.index for op in report.moved] == [6, 3]  # both swapped ops moved


# -- a TTNN module as the runtime pipeline prints it ---------------------------------------------


def test_ttnn_module_with_const_eval_function_nested_modules_and_deallocates():
    text = (DATA / "ttnn_resnet_block.mlir").read_text()
    module = read_module(str(DATA / "ttnn_resnet_block.mlir"))
    assert module.ops == 23
    ops = indexed(module)
    assert [(op, index, function) for _, op, index, function in ops] == [
        ("ttnn.prepare_conv2d_weights", 3, "main_const_eval_0"),  # \22OIHW\22 escapes in its name
        ("ttnn.to_layout", 3, "main_const_eval_0"),
        ("ttnn.to_layout", 12, "main"),
        ("ttnn.deallocate", 12, "main"),
        ("ttnn.reshape", 12, "main"),  # `..._tm0_tm0`(#loc4) -> the outer name's index
        ("ttnn.conv2d", 12, "main"),
        ("ttnn.deallocate", 12, "main"),
        ("ttnn.multiply", 14, "main"),  # fused[14, 16]: the smallest by default
        ("ttnn.add", 15, "main"),
        ("ttnn.deallocate", 15, "main"),
        ("ttnn.relu", 17, "main"),  # callsite(callee at caller): the callee
        ("ttnn.deallocate", 17, "main"),
    ]
    assert [line for line, *_ in ops] == [n for n, line in enumerate(text.split("\n"), 1) if "ttnn." in line and "loc(#loc" in line and "#loc)" not in line]
    assert check_order(module).ok


@pytest.mark.parametrize("policy, index", [(FusedPolicy.MIN, 14), (FusedPolicy.MAX, 16), (FusedPolicy.SKIP, None)])
def test_fused_policy(policy, index):
    module = read_module(str(DATA / "ttnn_resnet_block.mlir"), policy)
    multiply = [i for _, op, i, _ in indexed(module) if op == "ttnn.multiply"]
    assert multiply == ([] if index is None else [index])
    # max puts the multiply (16) after the add (15): the policy decides what is out of order
    assert check_order(module).ok is (policy is not FusedPolicy.MAX)


# -- structure: regions, blocks, attribute dictionaries, continuation lines ----------------------


def test_a_region_op_owns_its_closing_location_and_its_regions_are_blocks_of_their_own():
    text = """module {
  func.func @main(%arg0: i1 loc("0|arg")) {
    %0 = "ttnn.a"() : () -> i32 loc("1|a")
    %1 = "scf.if"(%arg0) ({
      %5 = "ttnn.inner"() : () -> i32 loc("9|inner")
      "scf.yield"(%5) : (i32) -> () loc("2|yield")
    }, {
    ^bb0(%b: i32 loc("77|blockarg")):
      "scf.yield"(%0) : (i32) -> () loc("8|yield")
    ^bb1:
      "scf.yield"(%0) : (i32) -> () loc("1|yield")
    }) : (i1) -> i32 loc("3|if")
    %2 = "ttnn.b"(%1) : (i32) -> i32 loc("4|b")
    func.return %2 : i32 loc("5|return")
  } loc("6|func")
} loc(unknown)"""
    module = read(text)
    assert [[(op.line, op.index) for op in module.indexed_ops(block)] for block in module.blocks] == [
        [(2, 6)],  # the func, in the module's block, at the line it starts
        [(3, 1), (4, 3), (13, 4), (14, 5)],  # the scf.if sits at line 4 with `}) ... loc("3|if")`
        [(5, 9), (6, 2)],  # its first region: 9 then 2 is out of order
        [(9, 8)],  # ^bb0
        [(11, 1)],  # ^bb1: a block of its own, so 8 -> 1 is fine
    ]
    assert [(v.op.line, v.function) for v in check_order(module).violations] == [(6, "main")]
    assert module.ops == 10


def test_attribute_dictionary_and_wrapped_signature_locations_are_not_op_locations():
    text = """func.func @f(
    %arg0: tensor<4xf32> loc("50|arg0"),
    %arg1: tensor<4xf32> {test.loc = loc("51|attr")} loc("52|arg1"))
    -> tensor<4xf32>
    attributes {
      test.entry = loc("53|wrapped attribute dictionary")
    } {
  %0 = "test.a"(%arg0) {test.loc = loc("54|in attr dict")} : (tensor<4xf32>) -> tensor<4xf32> loc("2|a")
  %1 = "test.b"(%0) {test.loc = loc("1|only in attr dict")} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "test.c"(%1) : (tensor<4xf32>) -> tensor<4xf32> loc("3|c")
  return %2 : tensor<4xf32>
} loc("0|f")"""
    module = read(text)
    assert indexed(module) == [(1, "func.func", 0, None), (8, "test.a", 2, "f"), (10, "test.c", 3, "f")]
    assert module.ops == 5


def test_a_continuation_line_takes_over_the_location():
    text = """%0 = "test.a"() : () -> i32 loc("5|not trailing")
    loc("1|continued")
%1 = "test.b"() : () -> i32 loc("2|b")
%2 = "test.c"()
    : () -> i32 loc("3|c")"""
    assert indexed(read(text)) == [(1, "test.a", 1, None), (3, "test.b", 2, None), (4, "test.c", 3, None)]


def test_generic_func_takes_its_name_from_sym_name_and_multiple_functions_are_separate():
    text = """"builtin.module"() ({
  "func.func"() <{function_type = () -> (), sym_name = "first"}> ({
    "test.a"() : () -> () loc("9|a")
  }) : () -> () loc(unknown)
  func.func @"second fn"() {
    "test.b"() : () -> () loc("1|b")
    "test.c"() : () -> () loc("2|c")
  } loc(unknown)
}) : () -> () loc(unknown)"""
    module = read(text)
    assert indexed(module) == [(3, "test.a", 9, "first"), (6, "test.b", 1, "second fn"), (7, "test.c", 2, "second fn")]
    assert check_order(module).ok  # 9 then 1: different functions


def test_escapes_and_punctuation_inside_inline_location_strings():
    text = r"""%0 = "test.a"() {s = "a(b"} : () -> () loc("DEBUG|\31\32|x\22y(z\5C")
%1 = "test.b"() : () -> () loc("13|getattr(m, '1')|a:b|c,d\0A"("f\22.py":1:2))
%2 = "test.c"() : () -> () loc("\22quoted\22|14|x")"""
    assert indexed(read(text)) == [(1, "test.a", 12, None), (2, "test.b", 13, None)]


def test_location_aliases_resolve_through_chains_in_any_order_and_on_either_side():
    text = """#loc3 = loc("outer"(#loc2))
#ttnn_layout3 = #ttnn.ttnn_layout<(d0, d1) -> (d0, d1), <1x1>, memref<1x1xbf16, #dram>, <interleaved>>
module {
  "test.a"() : () -> () loc(#loc3)
  "test.b"() : () -> () loc(#loc6)
  "test.c"() : () -> () loc(#loc)
  "test.d"() : () -> () loc(#loc.odd-name)
  "test.e"() : () -> () loc(#test.custom_location<"foo.mlir" * 32>)
} loc(unknown)
#loc6 = loc(callsite(#loc5 at #loc1))
#loc2 = loc("no index"(#loc1))
#loc5 = loc(fused<"CSE">[#loc4, #loc1])
#loc = loc("DEBUG|6|plain")
#loc1 = loc("DEBUG|8|x")
#loc4 = loc("DEBUG|5|y"("f":1:1))
#loc.odd-name = loc("7|z")
{-#
  dialect_resources: {
    builtin: {
      blob: "0x04000000"
    }
  }
#-}
this is not MLIR: nothing after the metadata is read"""
    assert [(op, index) for _, op, index, _ in indexed(read(text))] == [
        ("test.a", 8),
        ("test.b", 5),  # callsite -> fused[5, 8] -> the smallest
        ("test.c", 6),
        ("test.d", 7),
    ]


@pytest.mark.parametrize(
    "text, where, message",
    [
        ('"test.a"() : () -> () loc(#loc9)', (1, 1), "location alias #loc9 is never defined"),
        (
            '"test.a"() : () -> () loc(#loc1)\n#loc1 = loc("x"(#loc2))\n#loc2 = loc(fused[#loc1])',
            (1, 1),
            "cycle: #loc1 -> #loc2 -> a fused location -> #loc1",
        ),
        ('#loc1 = loc("1|a")\n#loc1 = loc("2|b")', (2, 1), "#loc1 is defined twice"),
        ('#weird = loc("1|a")\n#weird = loc("2|b")', (2, 1), "#weird is defined twice"),
        ("module {\n  }\n}", (3, 1), "`}` closes nothing"),
        ('module {\n  "test.a"() : () -> () loc("1|a")', (1, 8), "region `{` is never closed"),
        ('"test.a"(%0 : () -> () loc("1|a")', (1, 9), "`(` is never closed"),
        ('"test.a"(] : () -> ()', (1, 10), "`]` closes `(`"),
        ('"test.a"() : () -> () loc(callsite("a"))', (1, 39), "expected `at`"),
        ('"test.a"() : () -> () loc("1|a"', (1, 26), "`loc(` is never closed"),
        ('"test.a"() : () -> () loc("1|a)', (1, 27), "unterminated string"),
        ('"test.a"() : () -> () loc("\\q|a")', (1, 27), "unknown escape"),
    ],
)
def test_bad_input_is_an_input_error_at_its_place(text, where, message):
    with pytest.raises(InputError) as raised:
        read(text)
    problem = raised.value.problems[0]
    assert (problem.line, problem.col) == where
    assert message in problem.message


# -- reading files -----------------------------------------------------------------------------


def test_lines_come_back_whatever_the_chunking_and_line_endings(tmp_path, monkeypatch):
    path = tmp_path / "crlf.mlir"
    text = with_indices(RESNET).replace("\n", "\r\n")
    path.write_bytes(text.encode())
    expected = text.replace("\r\n", "\n").split("\n")
    for chunk in (1, 7, 64, 1 << 20):
        monkeypatch.setattr(reader_module, "_CHUNK", chunk)
        assert list(iter_lines(str(path))) == expected[:-1] if expected[-1] == "" else expected
    assert check_order(read_module(str(path))).indexed == 24


def test_an_overlong_line_is_refused_without_being_held(tmp_path, monkeypatch):
    monkeypatch.setattr(reader_module, "_CHUNK", 16)
    monkeypatch.setattr(reader_module, "MAX_LINE", 100)
    path = tmp_path / "long.mlir"
    path.write_text('"test.a"() : () -> () loc("1|a")\n' + "x" * 1000 + "\nshort\n")
    assert [line if line is OVERLONG else len(line) for line in iter_lines(str(path))] == [32, OVERLONG, 5]
    with pytest.raises(InputError, match=r"long.mlir:2:1: line longer than"):
        read_module(str(path))


def test_unreadable_files_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="missing.mlir:1:1: cannot read file"):
        read_module(str(tmp_path / "missing.mlir"))
    with pytest.raises(InputError, match="cannot read file"):
        read_module(str(tmp_path))  # a directory


def test_binary_garbage_does_not_crash(tmp_path):
    path = tmp_path / "garbage.mlir"
    path.write_bytes(bytes(range(256)) * 8)
    with pytest.raises(InputError):
        read_module(str(path))
