"""The MLIR lexer, string escapes, the location grammar, and the index in a name location."""

from __future__ import annotations

import pytest

from harness.mlir.lexer import BARE, HASH_ID, STRING, SYMBOL, VALUE, LexError, string_value, tokenize, unescape
from harness.mlir.locations import (
    MAX_DEPTH,
    AliasRef,
    CallSiteLoc,
    DialectLoc,
    FileLineColLoc,
    FusedLoc,
    LocationSyntaxError,
    NameLoc,
    UnknownLoc,
    name_index,
    parse_location,
)

ISSUE_NAME = (
    "DEBUG|15|ResNetModel[resnet]|ResNetEncoder[resnet.encoder]|BatchNorm2d[getattr(resnet.encoder.stages[0]"
    ".layers[1].layer, '1').normalization]|/usr/local/lib/python3.11/dist-packages/transformers/models/resnet/"
    "modeling_resnet.py:52|forward|54|aten__native_batch_norm"
)


def loc(text: str):
    """Parse what sits between `loc(` and `)`."""
    return parse_location(tokenize(text))


# -- lexer -------------------------------------------------------------------------------------


def test_a_string_with_colons_bars_parens_commas_and_quotes_is_one_token():
    tokens = tokenize(f'%55 = "ttir.batch_norm_inference"(%50) : (tensor<1xf32>) -> tensor<1xf32> loc("{ISSUE_NAME}")')
    strings = [t for t in tokens if t.kind is STRING]
    assert [string_value(t) for t in strings] == ["ttir.batch_norm_inference", ISSUE_NAME]
    assert tokens[0].kind is VALUE and tokens[0].col == 1
    assert tokens[-4].text == "loc" and tokens[-4].kind is BARE


def test_comments_are_dropped_but_not_inside_strings():
    tokens = tokenize('"a.b"() : () -> () loc("x//y") // loc("1|comment")')
    assert [t.text for t in tokens][-4:] == ["loc", "(", '"x//y"', ")"]


def test_columns_are_one_based_and_tokens_keep_their_line():
    tokens = tokenize('  #loc12 = loc(@"sym bol")', line=7)
    assert [(t.kind, t.col, t.line) for t in tokens][:1] == [(HASH_ID, 3, 7)]
    assert tokens[-2].kind is SYMBOL and tokens[-2].text == '@"sym bol"'


def test_an_unterminated_string_is_a_lex_error_at_its_quote():
    with pytest.raises(LexError) as raised:
        tokenize('  %0 = "ttnn.add"(%1) loc("DEBUG|1|abc\\")')
    assert raised.value.col == 27


@pytest.mark.parametrize(
    "body, value",
    [
        ("plain", "plain"),
        ("\\22quoted\\22", '"quoted"'),
        ('\\"quoted\\"', '"quoted"'),
        ("back\\\\slash", "back\\slash"),
        ("escaped\\0A", "escaped\n"),
        ("tab\\there\\n", "tab\there\n"),
        ("caf\\C3\\A9", "café"),
        ("\\7C", "|"),
    ],
)
def test_string_escapes_read_as_mlir_reads_them(body, value):
    assert unescape(body) == value


def test_an_unknown_escape_is_refused():
    with pytest.raises(ValueError, match="unknown escape"):
        unescape("\\q")


# -- location grammar --------------------------------------------------------------------------


def test_name_locations_nest_like_appendLocationSuffix_leaves_them():
    parsed = loc('"x_input_tm0_tm0"("x_input_tm0"("x"("f.py":52:0)))')
    assert parsed == NameLoc("x_input_tm0_tm0", NameLoc("x_input_tm0", NameLoc("x", FileLineColLoc("f.py", 52, 0))))


@pytest.mark.parametrize(
    "text, expected",
    [
        ('"mysource.cc":10', FileLineColLoc("mysource.cc", 10)),
        ('"mysource.cc":10:8', FileLineColLoc("mysource.cc", 10, 8)),
        ('"mysource.cc":10:8 to :18', FileLineColLoc("mysource.cc", 10, 8, None, 18)),
        ('"mysource.cc":10:8 to 12:18', FileLineColLoc("mysource.cc", 10, 8, 12, 18)),
        # file names with colons (multiple_add_with_loc.mlir) and u32-max lines (input_layout_loc_override.mlir)
        ('"test_ops.py:17_0_0":0:0', FileLineColLoc("test_ops.py:17_0_0", 0, 0)),
        ('"Matmul":4294967295:0', FileLineColLoc("Matmul", 4294967295, 0)),
    ],
)
def test_file_line_col_locations_and_ranges(text, expected):
    assert loc(text) == expected


def test_callsite_fused_unknown_dialect_and_alias_forms():
    assert loc('callsite("foo" at "mysource.cc":10:8)') == CallSiteLoc(NameLoc("foo"), FileLineColLoc("mysource.cc", 10, 8))
    assert loc('callsite(#loc40 at #loc41)') == CallSiteLoc(AliasRef("#loc40"), AliasRef("#loc41"))
    assert loc('fused["a.cc":10:8, #loc88]') == FusedLoc((FileLineColLoc("a.cc", 10, 8), AliasRef("#loc88")))
    assert loc('fused<"CSE">["a", "b"]') == FusedLoc((NameLoc("a"), NameLoc("b")), metadata='"CSE"')
    assert loc("fused[]") == FusedLoc(())
    assert loc("unknown") == UnknownLoc()
    assert loc("?") == UnknownLoc()
    assert loc('#test.custom_location<"foo.mlir" * 32>') == DialectLoc('#test.custom_location<"foo.mlir"*32>')
    assert loc('"add_1_0"(#loc1)') == NameLoc("add_1_0", AliasRef("#loc1"))


@pytest.mark.parametrize(
    "text, message",
    [
        ('callsite("foo")', "expected `at`"),
        ('"a" "b"', "unexpected text after the location"),
        ("fused[", "location ends too early"),
        ('"f":x', "expected an integer"),
        ("loc", "does not start a location"),
    ],
)
def test_malformed_locations_are_refused_with_the_offending_token(text, message):
    with pytest.raises(LocationSyntaxError, match=message):
        loc(text)


def test_absurd_nesting_is_refused_instead_of_overflowing_the_stack():
    deep = '"a"(' * (MAX_DEPTH + 5) + '"b"' + ")" * (MAX_DEPTH + 5)
    with pytest.raises(LocationSyntaxError, match="nested deeper"):
        loc(deep)


# -- the index in a name -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, index",
    [
        (ISSUE_NAME, 15),
        ("7|Tail[tail]|ReLU[tail.relu]|/localdev/test.py:106|forward|107|aten__relu", 7),  # tt-mlir's PyLoc comment
        ("2|/path/model.py:52|forward|52|aten__mul", 2),
        ("-1|unknown|unknown|-1|aten__view", -1),
        ("DEBUG|-1|unknown|unknown|-1|xla__device_data", -1),
        ("DEBUG|23|x_input_tm0", 23),
        ("input_relu", None),  # resnet50_last_module.mlir's names carry no index
        ("matmul_1_in_0_layout", None),
        ("15", None),  # an index field ends with `|`
        ("DEBUG|x|15|", None),
        ("debug|15|x", None),
        (" 15|x", None),
        ("12345678901234567890|x", None),  # beyond 18 digits is not an op index
    ],
)
def test_name_index(name, index):
    assert name_index(name) == index
