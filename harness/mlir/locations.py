"""MLIR locations: the syntax tree of ``loc(...)``, its parser, and the op index in a name.

Grammar (mlir/lib/AsmParser/LocationParser.cpp)::

    location ::= string-literal (`(` location `)`)?                        name
               | string-literal `:` int (`:` int)? (`to` int? (`:` int)?)?  file:line:col[ to ...]
               | `callsite` `(` location `at` location `)`
               | `fused` (`<` attribute `>`)? `[` (location (`,` location)*)? `]`
               | `unknown` | `?`
               | `#alias`                                                  (any nesting level)
               | `#dialect.attr<...>`                                      (dialect location)
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Sequence, Union

from harness.mlir.lexer import ARROW, BARE, HASH_ID, NUMBER, PUNCT, STRING, Token, string_value

MAX_DEPTH = 256  # deeper nesting is not something a compiler prints; refuse rather than recurse


class FusedPolicy(str, enum.Enum):
    """Which index a ``fused[...]`` location stands for. ``min`` is the default: a fused op
    (patterns merged several ops) sits where its earliest part was."""

    MIN = "min"
    MAX = "max"
    SKIP = "skip"  # a fused op is not checked

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class NameLoc:
    name: str
    child: "Location | None" = None


@dataclass(frozen=True)
class FileLineColLoc:
    file: str
    line: int
    col: int | None = None
    end_line: int | None = None
    end_col: int | None = None


@dataclass(frozen=True)
class CallSiteLoc:
    callee: "Location"
    caller: "Location"


@dataclass(frozen=True)
class FusedLoc:
    locations: tuple["Location", ...]
    metadata: str | None = None  # the attribute between `<` and `>`, as written


@dataclass(frozen=True)
class UnknownLoc:
    pass


@dataclass(frozen=True)
class DialectLoc:
    text: str  # e.g. #test.custom_location<"foo.mlir" * 32>: carries no index


@dataclass(frozen=True)
class AliasRef:
    name: str  # with the leading '#'


Location = Union[NameLoc, FileLineColLoc, CallSiteLoc, FusedLoc, UnknownLoc, DialectLoc, AliasRef]


class LocationSyntaxError(Exception):
    def __init__(self, token: Token | None, message: str):
        super().__init__(message)
        self.token = token
        self.message = message


INDEX_FIELD = r"(?:DEBUG\|)?(-?\d{1,18})\|"  # at the start of a name
_INDEX = re.compile(INDEX_FIELD)


def name_index(name: str) -> int | None:
    """The op index a name location carries (``15`` in ``DEBUG|15|ResNetModel[resnet]|...``),
    ``-1`` for the producer's "unknown", ``None`` when the name has no index field."""
    match = _INDEX.match(name)
    return int(match.group(1)) if match else None


def parse_location(tokens: Sequence[Token]) -> Location:
    """Parse the tokens between ``loc(`` and its ``)`` (exclusive) into a location."""
    parser = _Parser(tokens)
    location = parser.location(0)
    if parser.pos != len(tokens):
        parser.fail("unexpected text after the location")
    return location


class _Parser:
    def __init__(self, tokens: Sequence[Token]):
        self.tokens = tokens
        self.pos = 0

    def peek(self) -> Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def fail(self, message: str) -> None:
        token = self.peek() or (self.tokens[-1] if self.tokens else None)
        raise LocationSyntaxError(token, message)

    def take(self) -> Token:
        token = self.peek()
        if token is None:
            self.fail("location ends too early")
        self.pos += 1
        return token  # type: ignore[return-value]

    def at(self, text: str) -> bool:
        token = self.peek()
        return token is not None and token.text == text and token.kind in (PUNCT, BARE, ARROW)

    def expect(self, text: str) -> None:
        if not self.at(text):
            self.fail(f"expected `{text}` in location")
        self.pos += 1

    def integer(self) -> int:
        token = self.peek()
        if token is None or token.kind is not NUMBER or not token.text.isdigit():
            self.fail("expected an integer in file location")
        self.pos += 1
        return int(token.text)  # type: ignore[union-attr]

    def location(self, depth: int) -> Location:
        if depth > MAX_DEPTH:
            self.fail(f"location nested deeper than {MAX_DEPTH} levels")
        token = self.take()
        if token.kind is STRING:
            try:
                text = string_value(token)
            except ValueError as exc:
                raise LocationSyntaxError(token, str(exc)) from None
            if self.at(":"):
                return self.file_line_col(text)
            if self.at("("):
                self.pos += 1
                child = self.location(depth + 1)
                self.expect(")")
                return NameLoc(text, child)
            return NameLoc(text)
        if token.kind is HASH_ID:
            if self.at("<"):
                return DialectLoc(token.text + "".join(t.text for t in self.balanced_angles()))
            return AliasRef(token.text)
        if token.kind is BARE and token.text == "callsite":
            self.expect("(")
            callee = self.location(depth + 1)
            self.expect("at")
            caller = self.location(depth + 1)
            self.expect(")")
            return CallSiteLoc(callee, caller)
        if token.kind is BARE and token.text == "fused":
            metadata = " ".join(t.text for t in self.balanced_angles()[1:-1]) if self.at("<") else None
            self.expect("[")
            parts: list[Location] = []
            if not self.at("]"):
                parts.append(self.location(depth + 1))
                while self.at(","):
                    self.pos += 1
                    parts.append(self.location(depth + 1))
            self.expect("]")
            return FusedLoc(tuple(parts), metadata)
        if (token.kind is BARE and token.text == "unknown") or (token.kind is PUNCT and token.text == "?"):
            return UnknownLoc()
        self.pos -= 1
        self.fail(f"`{token.text}` does not start a location")
        raise AssertionError("unreachable")

    def file_line_col(self, file: str) -> FileLineColLoc:
        self.expect(":")
        line = self.integer()
        col = end_line = end_col = None
        if self.at(":"):
            self.pos += 1
            col = self.integer()
        if self.at("to"):
            self.pos += 1
            token = self.peek()
            if token is not None and token.kind is NUMBER:
                end_line = self.integer()
            if self.at(":"):
                self.pos += 1
                end_col = self.integer()
        return FileLineColLoc(file, line, col, end_line, end_col)

    def balanced_angles(self) -> Sequence[Token]:
        """The tokens of a `<...>` group (nested angles balanced; `->` is not a bracket)."""
        depth = 0
        start = self.pos
        while True:
            token = self.take()
            if token.kind is PUNCT and token.text == "<":
                depth += 1
            elif token.kind is PUNCT and token.text == ">":
                depth -= 1
                if depth == 0:
                    return self.tokens[start : self.pos]
