"""The reader's alias fast path, fast_alias(), takes what its pattern _FAST_ALIAS takes, with
the same groups; it may only decline (to the tokenizing path), never accept more."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.mlir.reader import _FAST_ALIAS, fast_alias, iter_lines, read_module
from tests.paths import DATA

_PARTS = st.sampled_from(
    ["#loc", "#loc0", "#loc7", "#loc012", "#loc123456789", "#loc1234567890", " = loc(", '"', "DEBUG|", "12|", "-1|",
     "0|", "1234567890123456789|", "ResNet[resnet]", "|", "\\", "\\22", "(#loc3)", "(#loc)", ":52", ":52:7", ")", " ",
     "\t", "fused[#loc1]", "x", "(", "٣", "loc(", "#x.y"]
)


def agrees(text: str) -> None:
    reference = _FAST_ALIAS.fullmatch(text)
    fast = fast_alias(text)
    if reference is None:
        assert fast is None, text
    elif fast is not None:
        assert fast == reference.groups(), text


@settings(max_examples=3000, deadline=None)
@given(st.lists(_PARTS, max_size=14).map("".join))
def test_fast_alias_takes_what_the_pattern_takes(text):
    agrees(text)


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=60))
def test_fast_alias_on_any_text(text):
    agrees(text)
    agrees('#loc5 = loc("' + text)


def test_it_declines_nothing_tt_mlir_prints():
    """Every alias line of the checked-in modules takes the fast path, as it did with the pattern."""
    lines = [line for path in sorted(DATA.glob("mlir/**/*.mlir")) for line in iter_lines(str(path))]
    taken = [line for line in lines if _FAST_ALIAS.fullmatch(line)]
    assert taken and all(fast_alias(line) == _FAST_ALIAS.fullmatch(line).groups() for line in taken)


def test_a_generated_module_reads_the_same_through_either_path(tmp_path, monkeypatch):
    import harness.mlir.reader as reader
    from benchmarks.order_check_bench import generate

    path = tmp_path / "m.mlir"
    generate(str(path), 3000, moved=3, seed=random.Random(4).randrange(100))
    fast = read_module(str(path))
    monkeypatch.setattr(reader, "fast_alias", lambda text: (m := _FAST_ALIAS.fullmatch(text)) and m.groups())
    assert read_module(str(path)) == fast
