"""Walk MLIR text op by op: each op's block, its function, and its trailing location's index.

The reader is streamed: it takes lines and never holds the file. What it keeps per op that may
carry an index is four machine ints (line, column, op name id, encoded index; see
:mod:`harness.mlir.aliases`), in per-block arrays, plus the alias table. Location aliases are
resolved when the module has been read, because MLIR prints most of them after the module.

Structure, as MLIR's printer writes it:

- a statement (an op, a block label, an alias definition) ends at a newline outside brackets;
  a line that starts with a token no op can start with (``:``, ``->``, ``loc``, ``{``, ...)
  continues the previous statement;
- a ``{`` that ends its line opens a region (the printer always breaks the line there);
  any other ``{`` is an attribute dictionary. A ``{`` that ends its line but whose first entry
  reads ``key = ...`` is a hand-wrapped attribute dictionary after all;
- an op's location is the ``loc(...)`` that ends its statement outside any bracket: so not
  the ``loc`` of a function or block argument (inside parentheses), nor one inside an
  attribute dictionary; ``} loc(...)`` gives a region op its location;
- ``#name = loc(...)`` at top level defines a location alias (before or after the module);
  other ``#name = ...`` and ``!name = ...`` aliases are skipped; ``{-#`` starts the file
  metadata (dialect resources), after which nothing matters.
"""

from __future__ import annotations

import re
from array import array
from dataclasses import dataclass
from typing import Iterable, Iterator

from harness.core.errors import InputError, Problem
from harness.mlir.aliases import NO_INDEX, UNDEFINED, AliasTable, UnresolvedAlias
from harness.mlir.lexer import (
    BARE,
    CARET_ID,
    HASH_ID,
    META_OPEN,
    PUNCT,
    STRING,
    SYMBOL,
    VALUE,
    LexError,
    Token,
    string_value,
    tokenize,
    unescape,
)
from harness.mlir.locations import INDEX_FIELD, FusedPolicy, LocationSyntaxError, parse_location

MAX_LINE = 64 * 1024 * 1024  # characters; a longer line is refused (or skipped, in metadata)
_CHUNK = 1 << 20
OVERLONG = "\x00<line too long>"  # stands for a refused line; no MLIR line starts with NUL
_MAX_PROBLEMS = 20

# The fast paths below match a location's index as part of the line (same pattern as
# locations.name_index, as an optional group: it matches whenever the name starts with one).
_INDEX_FIELD = "(?:" + INDEX_FIELD + ")?"
# An op statement on one line that ends with its location: `%0 = "ttnn.add"(...) ... loc(#loc5)`.
# The body may hold no string (so counting brackets in it is exact); anything else takes the
# tokenizing path.
_FAST_OP = re.compile(
    r'([ \t]*)(?:%[\w$.:#]+(?:[ \t]*,[ \t]*%[\w$.:#]+)*[ \t]*=[ \t]*)?'
    r'(?:"([\w$.]+)"|([A-Za-z_][\w$]*\.[\w$.]+)(?=[ \t(<]))(?![ \t]*=)'
    r'([^"]*)[ \t]loc\((?:#loc(0|[1-9]\d{0,8}|)|(#[\w$.-]+)|"' + _INDEX_FIELD + r'[^"\\]*")\)[ \t]*'
)
# `#locN = loc("name")`, `loc("name"(#locM))` or `loc("file":line[:col])`.
_FAST_ALIAS = re.compile(
    r'#loc(0|[1-9]\d{0,8}|) = loc\("' + _INDEX_FIELD + r'[^"\\]*"(?:\(#loc(0|[1-9]\d{0,8}|)\)|(:\d+(?::\d+)?))?\)[ \t]*'
)
# `_FAST_ALIAS` says what the alias fast path takes; fast_alias() below finds the same groups
# without running a regex over the whole line: the regex engine steps through a 300-character
# location name one character at a time, str.find does not (2x faster on tt-mlir's aliases).
# It may decline a line the pattern takes; the tokenizing path then reads it, as it reads every
# line the pattern refuses. tests/test_mlir_reader_fast.py holds it to the pattern.
_ALIAS_HEAD = re.compile(r'#loc(0|[1-9]\d{0,8}|) = loc\("')
_ALIAS_TAIL = re.compile(r'"(?:\(#loc(0|[1-9]\d{0,8}|)\)|(:\d+(?::\d+)?))?\)[ \t]*')
_INDEX_AT = re.compile(INDEX_FIELD)


def fast_alias(text: str) -> tuple | None:
    """``_FAST_ALIAS.fullmatch(text).groups()``, or None."""
    head = _ALIAS_HEAD.match(text)
    if head is None:
        return None
    start = head.end()
    close = text.find('"', start)
    if close == -1 or text.find("\\", start, close) != -1:
        return None
    tail = _ALIAS_TAIL.fullmatch(text, close)
    if tail is None:
        return None
    index = _INDEX_AT.match(text, start)
    child, file_line = tail.groups()
    return head.group(1), None if index is None else index.group(1), child, file_line


# Tokens that cannot start an op: a line starting with one continues the previous statement.
_CONTINUATIONS = frozenset({":", "->", "(", ")", "[", "]", ",", "=", "<", "{", "loc", "attributes", "to", "at"})


@dataclass(frozen=True)
class IndexedOp:
    line: int
    col: int
    op: str
    index: int


@dataclass(frozen=True)
class BlockOps:
    """The ops of one block that carry an index, in order."""

    function: str | None  # symbol of the nearest enclosing op that has one (`forward`)
    records: array  # (line, col, op name id, index) per op, interleaved: 32 bytes an op

    def __len__(self) -> int:
        return len(self.records) // 4

    @property
    def indices(self) -> array:
        return self.records[3::4]


@dataclass(frozen=True)
class ModuleOps:
    """What the order check needs from one module."""

    path: str
    ops: int  # every op read, indexed or not
    blocks: tuple[BlockOps, ...]
    op_names: tuple[str, ...]  # name_ids index this

    @property
    def indexed(self) -> int:
        return sum(len(block) for block in self.blocks)

    def indexed_ops(self, block: BlockOps) -> Iterator[IndexedOp]:
        names = self.op_names
        records = iter(block.records)
        for line, col, name_id, index in zip(records, records, records, records):
            yield IndexedOp(line, col, names[name_id], index)


# ---------------------------------------------------------------------------------------------
# Reading lines


def iter_lines(path: str) -> Iterator[str]:
    """The lines of a text file without their newlines, read in chunks. A line longer than
    MAX_LINE comes out as OVERLONG instead, so one huge line never sits in memory."""
    try:
        handle = open(path, encoding="utf-8", errors="replace", newline=None)
    except OSError as exc:
        raise InputError.at(path, 1, 1, f"cannot read file: {exc.strerror or exc}") from None
    with handle:
        partial: list[str] = []  # the start of a line that no chunk has ended yet
        partial_size = 0
        overlong = False
        while True:
            try:
                chunk = handle.read(_CHUNK)
            except OSError as exc:
                raise InputError.at(path, 1, 1, f"cannot read file: {exc.strerror or exc}") from None
            if not chunk:
                break
            lines = chunk.split("\n")
            tail = lines.pop()
            if lines:
                head = lines[0]
                if overlong or partial_size + len(head) > MAX_LINE:
                    lines[0] = OVERLONG
                elif partial:
                    lines[0] = "".join(partial) + head
                partial, partial_size, overlong = [], 0, False
                yield from lines
            if not overlong:
                partial.append(tail)
                partial_size += len(tail)
                if partial_size > MAX_LINE:
                    partial, partial_size, overlong = [], 0, True
        if overlong:
            yield OVERLONG
        elif partial_size:
            yield "".join(partial)


def read_module(path: str, fused: FusedPolicy = FusedPolicy.MIN) -> ModuleOps:
    """Read one MLIR file; raises InputError (with ``path:line:col``) when it can't."""
    reader = ModuleReader(path, fused)
    lines = iter_lines(path)
    try:
        reader.feed(lines)
    finally:
        lines.close()  # the reader may stop early, at the file metadata
    return reader.finish()


# ---------------------------------------------------------------------------------------------
# The reader

# Statement kinds
_OP, _LABEL, _ALIAS, _SKIP = "op", "label", "alias", "skip"


class _Stmt:
    """A statement being read (mutable, internal)."""

    __slots__ = ("kind", "line", "col", "name", "symbol", "brackets", "loc", "alias")

    def __init__(self, kind: str, line: int, col: int, name: str | None):
        self.kind = kind
        self.line = line
        self.col = col
        self.name = name
        self.symbol: str | None = None
        self.brackets: list[Token] = []  # open ( [ { of this statement, outside regions
        self.loc: int | None = None  # encoded trailing location, while it is still trailing
        self.alias: str | None = None


class _Block:
    __slots__ = ("function", "data")

    def __init__(self, function: str | None):
        self.function = function
        self.data = array("q")  # (line, col, name id, encoded index) per op, interleaved


class _Region:
    __slots__ = ("block", "function", "stmt", "pending", "fresh", "opener")

    def __init__(self, block: _Block, opener: Token | None):
        self.block = block  # the current block; a label starts the next one
        self.function = block.function
        self.stmt: _Stmt | None = None  # the statement being read
        # A finished statement that the next line may still continue: a _Stmt, or an op
        # record (line, col, name id, encoded index) from the fast path. Nothing but a
        # label changes `block`, and a label flushes this first, so it belongs to `block`.
        self.pending: _Stmt | tuple | None = None
        self.fresh = True  # no statement read yet
        self.opener = opener  # the `{`, for "unclosed region" errors


class ModuleReader:
    """Feed it lines (:meth:`feed`, any number of times), then :meth:`finish`."""

    def __init__(self, path: str, fused: FusedPolicy = FusedPolicy.MIN, first_line: int = 1):
        self.path = path
        self.stopped = False  # reached the file metadata: the rest can be skipped
        self._aliases = AliasTable(fused)
        self._line = first_line - 1
        self._names: dict[str, int] = {}
        self._blocks: list[_Block] = []
        self._ops = 0
        self._frames = [_Region(self._new_block(None), None)]
        self._loc_tokens: list[Token] | None = None  # a trailing `loc(` group being collected
        self._loc_depth = 0

    # -- the hot loop ----------------------------------------------------------------------
    def feed(self, lines: Iterable[str]) -> None:
        """Read lines until they run out or the file metadata (``{-#``) starts."""
        if self.stopped:
            return
        fast_op_match = _FAST_OP.fullmatch
        aliases = self._aliases
        numbered = aliases.numbered  # grows in place, never replaced
        names = self._names
        frames = self._frames
        top = frames[0]
        line_no = self._line
        ops = 0  # fast-path ops, added to self._ops on the way out
        try:
            for text in lines:
                line_no += 1
                frame = frames[-1]
                if frame.stmt is None:
                    if frame is top:  # mostly alias definitions, before and after the module
                        match = fast_alias(text) if text.startswith("#loc") else None
                        if match is not None:
                            digits, index, child, file_line = match
                            key = int(digits) + 1 if digits else 0
                            if key < len(numbered) or aliases.reserve(key):
                                pending = frame.pending
                                if pending is not None:
                                    self._emit(frame, pending)
                                    frame.pending = None
                                if numbered[key] != UNDEFINED:
                                    raise InputError.at(self.path, line_no, 1, f"location alias #loc{digits} is defined twice")
                                if file_line is not None:
                                    value = NO_INDEX  # a file location, whatever its file name
                                elif index is not None:
                                    value = int(index)
                                    if value < NO_INDEX:
                                        value = NO_INDEX
                                elif child is not None:
                                    ckey = int(child) + 1 if child else 0
                                    if ckey < len(numbered) or aliases.reserve(ckey):
                                        value = numbered[ckey]
                                        if value < NO_INDEX:
                                            value = -2 - 2 * ckey
                                    else:
                                        value = aliases.ref("#loc" + child)
                                else:
                                    value = NO_INDEX
                                numbered[key] = value
                                continue
                    match = fast_op_match(text)
                    if match is not None:
                        indent, generic, custom, body, digits, alias, index = match.groups()
                        count = body.count
                        if (
                            count("(") == count(")")
                            and count("{") == count("}")
                            and ("[" not in body or count("[") == count("]"))
                            and "//" not in body
                        ):
                            pending = frame.pending
                            if type(pending) is tuple:
                                ops += 1
                                if pending[3] != NO_INDEX:
                                    frame.block.data.extend(pending)
                            elif pending is not None:
                                self._emit(frame, pending)
                            name = generic or custom
                            name_id = names.get(name)
                            if name_id is None:
                                name_id = names[name] = len(names)
                            if digits is not None:
                                key = int(digits) + 1 if digits else 0
                                if key < len(numbered) or aliases.reserve(key):
                                    value = numbered[key]
                                    if value < NO_INDEX:  # not defined yet: refer to it
                                        value = -2 - 2 * key
                                else:
                                    value = aliases.ref("#loc" + digits)
                            elif alias is not None:
                                value = aliases.ref(alias)
                            elif index is not None:
                                value = int(index)
                                if value < NO_INDEX:
                                    value = NO_INDEX
                            else:
                                value = NO_INDEX
                            frame.pending = (line_no, len(indent) + 1, name_id, value)
                            frame.fresh = False
                            continue
                self._line = line_no
                self._ops += ops
                ops = 0
                self._slow(text)
                if self.stopped:
                    break
        finally:
            self._line = line_no
            self._ops += ops

    # -- the tokenizing path ---------------------------------------------------------------
    def _slow(self, text: str) -> None:
        if text is OVERLONG:
            raise self._error(1, f"line longer than {MAX_LINE // (1024 * 1024)} MiB")
        try:
            tokens = tokenize(text, self._line)
        except LexError as exc:
            raise self._error(exc.col, exc.message) from None
        count = len(tokens)
        i = 0
        while i < count:
            token = tokens[i]
            if self._loc_tokens is not None:
                self._collect_loc(token)
                i += 1
                continue
            frame = self._frames[-1]
            stmt = frame.stmt
            if stmt is None:
                if token.kind is PUNCT and token.text == "}":
                    self._close_region(token)
                    i += 1
                    continue
                if frame.pending is not None:
                    if token.text in _CONTINUATIONS and token.kind is not STRING:
                        stmt = frame.stmt = self._resume(frame.pending)
                    else:
                        self._emit(frame, frame.pending)
                    frame.pending = None
                if stmt is None:
                    stmt = self._start(frame, tokens, i)
                    if stmt is None:  # metadata reached, or the region was an attribute dict
                        if self.stopped:
                            return
                        continue
            kind, value = token.kind, token.text
            if kind is BARE and value == "loc" and not stmt.brackets and i + 1 < count and tokens[i + 1].text == "(":
                self._loc_tokens = [tokens[i + 1]]
                self._loc_depth = 1
                i += 2
                continue
            stmt.loc = None  # whatever follows a location means it was not the trailing one
            if kind is PUNCT:
                if value in "([":
                    stmt.brackets.append(token)
                elif value == "{":
                    if i == count - 1:
                        self._open_region(stmt, token)
                    else:
                        stmt.brackets.append(token)
                elif value in ")]}":
                    if not stmt.brackets and value == "}":
                        self._close_region(token)
                    else:
                        self._close_bracket(stmt, token)
            elif kind is SYMBOL and stmt.symbol is None and not stmt.brackets:
                stmt.symbol = _symbol_name(token)
            elif kind is BARE and value == "sym_name" and stmt.symbol is None and i + 2 < count:
                if tokens[i + 1].text == "=" and tokens[i + 2].kind is STRING:  # generic form
                    stmt.symbol = _string(tokens[i + 2], self)
            i += 1
        frame = self._frames[-1]
        stmt = frame.stmt
        if stmt is not None and not stmt.brackets and self._loc_tokens is None:
            frame.pending = stmt
            frame.stmt = None

    def _start(self, frame: _Region, tokens: list[Token], i: int) -> _Stmt | None:
        """Begin a statement at tokens[i]; None when there is none to begin."""
        token = tokens[i]
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        is_top = frame is self._frames[0]
        kind, name = _OP, None
        if token.kind is META_OPEN and is_top:
            self.stopped = True
            return None
        if (
            frame.fresh
            and not is_top
            and token.kind in (BARE, STRING)
            and following is not None
            and following.text == "="
        ):
            # `{` + newline + `key = ...`: a wrapped attribute dictionary, not a region
            self._frames.pop()
            parent = self._frames[-1].stmt
            assert parent is not None and frame.opener is not None
            parent.brackets.append(frame.opener)
            return None
        if token.kind is CARET_ID:
            kind = _LABEL
            frame.block = self._new_block(frame.function)
        elif token.kind is HASH_ID and is_top and following is not None and following.text == "=":
            # only `#name = loc(...)` defines a location alias; `#name = #dialect<...>` does not
            is_loc = i + 2 < len(tokens) and tokens[i + 2].kind is BARE and tokens[i + 2].text == "loc"
            kind = _ALIAS if is_loc else _SKIP
        elif token.kind is PUNCT and token.text == "!" and is_top:
            kind = _SKIP  # a type alias
        elif token.kind is VALUE:
            j = i
            while j < len(tokens) and (tokens[j].kind is VALUE or tokens[j].text == ","):
                j += 1
            if j + 1 < len(tokens) and tokens[j].text == "=" and tokens[j + 1].kind in (STRING, BARE):
                name = _op_name(tokens[j + 1], self)
        elif token.kind in (STRING, BARE):
            name = _op_name(token, self)
        else:
            kind = _SKIP
        frame.fresh = False
        stmt = _Stmt(kind, token.line, token.col, name)
        if kind is _ALIAS:
            stmt.alias = token.text
        frame.stmt = stmt
        return stmt

    def _resume(self, pending: _Stmt | tuple) -> _Stmt:
        if isinstance(pending, _Stmt):
            return pending
        line, col, name_id, _value = pending
        return _Stmt(_OP, line, col, next(name for name, known in self._names.items() if known == name_id))

    def _collect_loc(self, token: Token) -> None:
        tokens = self._loc_tokens
        assert tokens is not None
        tokens.append(token)
        if token.kind is PUNCT:
            if token.text == "(":
                self._loc_depth += 1
            elif token.text == ")":
                self._loc_depth -= 1
                if self._loc_depth == 0:
                    self._loc_tokens = None
                    try:
                        location = parse_location(tokens[1:-1])
                    except LocationSyntaxError as exc:
                        at = exc.token or tokens[0]
                        raise InputError.at(self.path, at.line, at.col, exc.message) from None
                    stmt = self._frames[-1].stmt
                    assert stmt is not None
                    stmt.loc = self._aliases.encode(location)

    def _open_region(self, owner: _Stmt, brace: Token) -> None:
        parent = self._frames[-1]
        function = owner.symbol if owner.symbol is not None else parent.function
        self._frames.append(_Region(self._new_block(function), brace))

    def _close_region(self, brace: Token) -> None:
        frame = self._frames[-1]
        if len(self._frames) == 1:
            raise self._error(brace.col, "`}` closes nothing")
        stmt = frame.stmt
        if stmt is not None:
            if stmt.brackets:
                opened = stmt.brackets[-1]
                raise self._error(brace.col, f"`}}` before `{opened.text}` from line {opened.line} is closed")
            frame.pending = stmt
            frame.stmt = None
        if frame.pending is not None:
            self._emit(frame, frame.pending)
            frame.pending = None
        self._frames.pop()

    def _close_bracket(self, stmt: _Stmt, token: Token) -> None:
        if not stmt.brackets:
            raise self._error(token.col, f"`{token.text}` closes nothing")
        opened = stmt.brackets.pop()
        if "([{".index(opened.text) != ")]}".index(token.text):
            raise self._error(token.col, f"`{token.text}` closes `{opened.text}` from line {opened.line}:{opened.col}")

    # -- results ---------------------------------------------------------------------------
    def _emit(self, frame: _Region, finished: _Stmt | tuple) -> None:
        """A statement of ``frame``'s current block is complete: count and keep it."""
        if isinstance(finished, tuple):
            record = finished
        elif finished.kind is _ALIAS:
            if finished.loc is not None and not self._aliases.define(finished.alias, finished.loc):  # type: ignore[arg-type]
                raise InputError.at(self.path, finished.line, finished.col, f"location alias {finished.alias} is defined twice")
            return
        elif finished.kind is _OP:
            name_id = self._names.get(finished.name or "<unnamed>")
            if name_id is None:
                name_id = self._names[finished.name or "<unnamed>"] = len(self._names)
            record = (finished.line, finished.col, name_id, NO_INDEX if finished.loc is None else finished.loc)
        else:
            return
        self._ops += 1
        if record[3] != NO_INDEX:
            frame.block.data.extend(record)

    def _new_block(self, function: str | None) -> _Block:
        block = _Block(function)
        self._blocks.append(block)
        return block

    def _error(self, col: int, message: str) -> InputError:
        return InputError.at(self.path, self._line, col, message)

    def finish(self) -> ModuleOps:
        """Check the module is closed, resolve aliases, and return its indexed ops."""
        if self._loc_tokens is not None:
            start = self._loc_tokens[0]
            raise InputError.at(self.path, start.line, start.col, "`loc(` is never closed")
        if not self.stopped:
            frame = self._frames[-1]
            if len(self._frames) > 1:
                opener = frame.opener
                assert opener is not None
                raise InputError.at(self.path, opener.line, opener.col, "region `{` is never closed")
            if frame.stmt is not None and frame.stmt.brackets:
                opened = frame.stmt.brackets[-1]
                raise InputError.at(self.path, opened.line, opened.col, f"`{opened.text}` is never closed")
        for frame in self._frames:
            for finished in (frame.pending, frame.stmt):
                if finished is not None:
                    self._emit(frame, finished)
            frame.pending = frame.stmt = None
        blocks = []
        problems: list[Problem] = []
        resolve = self._aliases.resolve
        numbered = self._aliases.numbered
        for block in self._blocks:
            data = block.data
            # Resolve and compact the records in place: the array is the bulk of the memory.
            kept = 0
            records = iter(data)  # reads ahead of `kept`, so overwriting behind it is safe
            for line, col, name_id, value in zip(records, records, records, records):
                if value < NO_INDEX:
                    slot = -2 - value
                    found = NO_INDEX - 1 if slot & 1 else numbered[slot >> 1]
                    if found >= NO_INDEX:  # a numbered alias whose value is known
                        value = found
                    else:
                        try:
                            value = resolve(value)
                        except UnresolvedAlias as exc:
                            if len(problems) < _MAX_PROBLEMS:
                                problems.append(Problem(self.path, line, col, str(exc)))
                            continue
                    if value == NO_INDEX:
                        continue
                data[kept] = line
                data[kept + 1] = col
                data[kept + 2] = name_id
                data[kept + 3] = value
                kept += 4
            del data[kept:]
            if data:
                blocks.append(BlockOps(block.function, data))
        if problems:
            raise InputError(problems)
        return ModuleOps(self.path, self._ops, tuple(blocks), tuple(self._names))


# ---------------------------------------------------------------------------------------------
# Small helpers


def _string(token: Token, reader: ModuleReader) -> str:
    try:
        return string_value(token)
    except ValueError as exc:
        raise reader._error(token.col, str(exc)) from None


def _op_name(token: Token, reader: ModuleReader) -> str:
    return _string(token, reader) if token.kind is STRING else token.text


def _symbol_name(token: Token) -> str:
    body = token.text[1:]
    if body.startswith('"'):
        try:
            return unescape(body[1:-1])
        except ValueError:
            return body
    return body
