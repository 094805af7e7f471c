"""The libyaml fast path of the YAML loader decides nothing the pure-Python loader would not.

Whatever libyaml composes must be what the pure-Python reference composes, down to every
value's line and column; whatever it refuses goes to the reference, whose messages stay.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core import yamlnodes
from harness.core.errors import InputError
from harness.core.yamlnodes import _compose_fast, _convert, _load_reference, load_text

REPO = Path(__file__).resolve().parents[1]
SHIPPED = sorted(
    p for folder in ("configs", "jobs", "tests/data") for p in (REPO / folder).rglob("*.y*ml") if p.is_file()
)


def reference(text: str):
    """The pure-Python loader's tree, or its message."""
    try:
        return _load_reference(text, "f.yaml")
    except InputError as exc:
        return str(exc.problems[0])


def agrees(text: str) -> None:
    root = _compose_fast(text)
    if root is None:
        return  # the reference decides: nothing to compare
    try:
        fast = _convert(root, "f.yaml")
    except InputError as exc:
        fast = str(exc.problems[0])
    assert fast == reference(text), text


def test_libyaml_is_there():
    """The PyYAML wheels carry libyaml: without it every load takes the slow path (correct, slow)."""
    assert yamlnodes._CLOADER is not None


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(REPO)))
def test_every_shipped_file_loads_the_same(path):
    agrees(path.read_text(encoding="utf-8"))


def test_the_catalogs_every_command_reads_take_the_fast_path():
    """`harness classify` reads the signature catalog on every call, validate the profiles."""
    for name in ("signatures.yaml", "profiles.yaml", "boards.yaml"):
        assert _compose_fast((REPO / "configs" / name).read_text(encoding="utf-8")) is not None, name


@pytest.mark.parametrize(
    "text",
    [
        "a: &x 1\nb: *x\n",  # an alias: refused where it stands
        "a: [1, 2\n",  # unclosed flow sequence
        "a: 1\n---\nb: 2\n",  # two documents
        "a:\n\t- 1\n",  # a tab
        "a: 1\na: 2\n",  # a duplicate key
        "" ,  # empty
        "# only a comment\n",
        "!!python/object:os.system x\n",
        "a: b: c\n",
        "[" * 70 + "]" * 70 + "\n",  # deeper than the fast path goes
        "a: '\ud800'\n",  # a lone surrogate (not from a file, but load_text takes any str)
        "a: \x00\n",
        "a: |# no space\n  x\n",
        "k: \ufeffv\n",
    ],
)
def test_what_the_fast_path_leaves_is_judged_as_before(text):
    expected = reference(text)
    try:
        got = load_text(text, "f.yaml")
    except InputError as exc:
        got = str(exc.problems[0])
    assert got == expected


def test_deep_nesting_is_still_a_clear_message():
    with pytest.raises(InputError, match="nested too deeply"):
        load_text("[" * 5000 + "]" * 5000, "f.yaml")


_FRAGMENTS = st.sampled_from(
    [
        "a", "key", "- ", ": ", ":", " ", "  ", "\t", "\n", "\n  ", "\n- ", "#", " # c", "'", '"', "\\", "[", "]",
        "{", "}", ",", "?", "&a ", "*a", "!!str ", "!x ", "|", ">", "|-\n  x\n", "---", "...", "%YAML 1.1\n", "1",
        "0x1F", "1e3", "true", "null", "~", "2025-01-01", "é", "\u2028", "\x85", "\ufeff", "@", "`", "%", "\r\n",
        "=", "<<: ", "x: {a: 1, b: [2, 3]}", "|+", ">-", "|2", "\n\n", "a: |\n", "b: >\n  ", "-1", ".5", ".inf", "\n    ", ": |\n  l1\n  l2\n", "'it''s'", '"\\x41\\u00e9"',
    ]
)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_FRAGMENTS, max_size=40).map("".join))
def test_random_text_composes_the_same(text):
    agrees(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SHIPPED), st.data())
def test_mutated_specs_compose_the_same(path, data):
    text = path.read_text(encoding="utf-8")
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(text)))
        cut = data.draw(st.integers(0, 8))
        insert = data.draw(st.sampled_from(["", " ", "\t", ":", "-", "'", '"', "\n", "  ", "#", "[", "{", "*a", "&a"]))
        text = text[:at] + insert + text[at + cut :]
    agrees(text)


def test_yaml_module_still_has_what_the_fast_path_uses():
    assert all(hasattr(yaml, name) for name in ("MappingStartEvent", "SequenceEndEvent", "AliasEvent", "DocumentStartEvent"))
