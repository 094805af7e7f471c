"""Property: any location tree gives the same index inline and through aliases.

Random location trees (names with and without `index|`, tricky characters, file locations,
callsites, fused locations, unknown and dialect locations) are printed the way MLIR's printer
does: once inline (--mlir-print-local-scope) and once with random subtrees hoisted into
`#loc` aliases defined before and after the module in random order. Both must read back to
the index the tree was built to carry.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.errors import InputError
from harness.mlir.locations import FusedPolicy
from harness.mlir.reader import ModuleReader

# -- location trees that know their index ------------------------------------------------------


@dataclass(frozen=True)
class Name:
    text: str
    index: int | None  # what the name carries (None: no `index|` field)
    child: object = None


@dataclass(frozen=True)
class File:
    text: str
    line: int
    col: int


@dataclass(frozen=True)
class CallSite:
    callee: object
    caller: object


@dataclass(frozen=True)
class Fused:
    parts: tuple
    metadata: bool


@dataclass(frozen=True)
class Leaf:
    text: str  # `unknown`, `?`, or a dialect location


TRICKY = st.sampled_from(list("\"\\|():,'\n\t #{}[]<>/é€x_.-") + ["DEBUG|", "loc(", "12|"])
REST = st.lists(st.one_of(TRICKY, st.characters(codec="utf-8")), max_size=12).map(lambda chars: "x" + "".join(chars))


@st.composite
def names(draw, child=st.none()):
    rest = draw(REST)
    index = draw(st.one_of(st.none(), st.just(-1), st.integers(min_value=0, max_value=10**6)))
    prefix = draw(st.sampled_from(["DEBUG|", ""]))
    text = rest if index is None else f"{prefix}{index}|{rest}"
    if index is None and draw(st.booleans()):
        text = prefix + rest  # `DEBUG|x...`: a prefix without an index is no index
    return Name(text, index, draw(child))


LEAVES = st.one_of(
    names(),
    st.builds(File, REST | st.just("7|file/name.py"), st.integers(0, 2**32 - 1), st.integers(0, 99)),
    st.sampled_from([Leaf("unknown"), Leaf("?"), Leaf('#test.custom_location<"foo.mlir" * 32>')]),
)
TREES = st.recursive(
    LEAVES,
    lambda children: st.one_of(
        names(child=children),
        st.builds(CallSite, children, children),
        st.builds(Fused, st.lists(children, max_size=3).map(tuple), st.booleans()),
    ),
    max_leaves=8,
)


def expected_index(loc, policy: FusedPolicy) -> int | None:
    """The documented semantics, from how the tree was built (no parsing involved)."""
    if isinstance(loc, Name):
        if loc.index is not None:
            return loc.index if loc.index >= 0 else None
        return expected_index(loc.child, policy) if loc.child is not None else None
    if isinstance(loc, CallSite):
        return expected_index(loc.callee, policy)
    if isinstance(loc, Fused):
        if policy is FusedPolicy.SKIP:
            return None
        indices = [i for i in (expected_index(part, policy) for part in loc.parts) if i is not None]
        if not indices:
            return None
        return min(indices) if policy is FusedPolicy.MIN else max(indices)
    return None


# -- printing as MLIR does ---------------------------------------------------------------------


def escape(text: str, style: int) -> str:
    """llvm::printEscapedString (style 0), the other escapes MLIR's lexer accepts (style 1), or
    every byte in hex (style 2: then even the index digits must be unescaped to be found)."""
    out = []
    for byte in text.encode("utf-8"):
        char = chr(byte)
        if style == 2:
            out.append(f"\\{byte:02x}")
        elif char == "\\":
            out.append("\\\\")
        elif char == '"':
            out.append('\\"' if style else "\\22")
        elif style and char == "\n":
            out.append("\\n")
        elif style and char == "\t":
            out.append("\\t")
        elif 0x20 <= byte < 0x7F:
            out.append(char)
        else:
            out.append(f"\\{byte:02X}")
    return '"' + "".join(out) + '"'


class Printer:
    def __init__(self, draw=None):
        self.draw = draw  # None: print inline; else draw which subtrees become aliases
        self.definitions: list[str] = []

    def location(self, loc) -> str:
        """What goes inside `loc(...)`: an alias reference or the location itself."""
        body = self.body(loc)
        if self.draw is None or not self.draw(st.booleans()):
            return body
        name = self.draw(st.sampled_from(["#loc{n}", "#loc{n}", "#l_{n}.x$-y"])).format(n=len(self.definitions) + 1)
        self.definitions.append(f"{name} = loc({body})")
        return name

    def body(self, loc) -> str:
        style = self.draw(st.integers(0, 2)) if self.draw else 0
        if isinstance(loc, Name):
            text = escape(loc.text, style)
            return text if loc.child is None else f"{text}({self.location(loc.child)})"
        if isinstance(loc, File):
            return f"{escape(loc.text, style)}:{loc.line}:{loc.col}"
        if isinstance(loc, CallSite):
            return f"callsite({self.location(loc.callee)} at {self.location(loc.caller)})"
        if isinstance(loc, Fused):
            meta = '<"CSE">' if loc.metadata else ""
            return f"fused{meta}[{', '.join(self.location(part) for part in loc.parts)}]"
        return loc.text


def module_text(ops: list[str], before: list[str], after: list[str]) -> str:
    lines = before + ["module {", "  func.func @f() {"]
    lines += [f'    %{n} = "test.op{n}"() : () -> i32 loc({loc})' for n, loc in enumerate(ops)]
    lines += ["    return loc(unknown)", "  } loc(unknown)", "} loc(unknown)"] + after
    return "\n".join(lines)


def read_indices(text: str, policy: FusedPolicy) -> dict[int, int]:
    reader = ModuleReader("p.mlir", policy)
    reader.feed(text.split("\n"))
    module = reader.finish()
    return {op.line: op.index for block in module.blocks for op in module.indexed_ops(block)}


@settings(max_examples=150, deadline=None)
@given(trees=st.lists(TREES, min_size=1, max_size=5), policy=st.sampled_from(list(FusedPolicy)), data=st.data())
def test_inline_and_alias_forms_give_the_index_the_tree_carries(trees, policy, data):
    inline = Printer()
    inline_text = module_text([inline.location(tree) for tree in trees], [], [])

    aliased = Printer(data.draw)
    ops = [aliased.location(tree) for tree in trees]
    definitions = data.draw(st.permutations(aliased.definitions))
    split = data.draw(st.integers(0, len(definitions)))
    alias_text = module_text(ops, definitions[:split], definitions[split:])

    first_op_line = 3
    expected = {
        first_op_line + n: index
        for n, index in enumerate(expected_index(tree, policy) for tree in trees)
        if index is not None
    }
    assert read_indices(inline_text, policy) == expected
    assert read_indices(alias_text, policy) == {line + split: index for line, index in expected.items()}


# -- robustness: any text either reads or is an InputError --------------------------------------

PIECES = st.sampled_from(
    ['"', "\\", "(", ")", "{", "}", "[", "]", "<", ">", "loc(", "#loc1", "#loc", " = ", "%0", "^bb0:", ":", ",", "{-#",
     "#-}", '"7|x"', "fused[", "callsite(", " at ", "unknown", "?", "\n", "func.func @f", '"t.op"()', "//", "é", "\x00"]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(PIECES, st.text(max_size=3)), max_size=40).map("".join))
def test_any_text_reads_or_is_an_input_error_never_a_crash(text):
    reader = ModuleReader("fuzz.mlir")
    try:
        reader.feed(text.split("\n"))
        reader.finish()
    except InputError as exc:
        assert all(problem.path == "fuzz.mlir" and problem.line >= 1 for problem in exc.problems)
