"""Tokens of MLIR text, one line at a time.

Quoted strings are matched first, so ``:``, ``|``, ``(``, ``)``, ``,`` and ``'`` inside a
string never split anything. MLIR's printer never puts a raw newline inside a token (it
escapes newlines in strings as ``\\0A``), so a line is a complete run of tokens.
"""

from __future__ import annotations

import re
from typing import NamedTuple

# Token kinds (compared with ``is``: they are interned constants).
STRING = "string"  # "..." with the quotes; see unescape() for its value
HASH_ID = "hash"  # #loc12, #ttnn.ttnn_layout (an alias or a dialect attribute)
VALUE = "value"  # %0, %arg1, %5:2
CARET_ID = "caret"  # ^bb0
SYMBOL = "symbol"  # @forward, @"quoted name"
BARE = "bare"  # loc, callsite, func.func, tensor
NUMBER = "number"
ARROW = "arrow"  # ->
META_OPEN = "meta_open"  # {-#  (file metadata: dialect resources)
META_CLOSE = "meta_close"  # #-}
PUNCT = "punct"  # any other single character: ( ) [ ] { } < > , : = ? ! ...


class Token(NamedTuple):
    kind: str
    text: str
    line: int
    col: int  # 1-based


class LexError(Exception):
    def __init__(self, col: int, message: str):
        super().__init__(message)
        self.col = col
        self.message = message


_TOKEN = re.compile(
    r"""
      [ \t\r\f\v]+
    | (?P<comment>//.*)
    | (?P<string>"(?:[^"\\]|\\.)*")
    | (?P<badstring>".*)
    | (?P<meta_open>\{-\#)
    | (?P<meta_close>\#-\})
    | (?P<hash>\#[A-Za-z_][\w$.-]*)
    | (?P<value>%[\w$.-]+(?::\d+)?)
    | (?P<caret>\^[\w$.-]+)
    | (?P<symbol>@(?:[\w$.-]+|"(?:[^"\\]|\\.)*"))
    | (?P<arrow>->)
    | (?P<number>-?(?:0x[0-9A-Fa-f]+|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?))
    | (?P<bare>[A-Za-z_][\w$.]*)
    | (?P<punct>.)
    """,
    re.VERBOSE,
)
_KINDS = {
    "string": STRING,
    "hash": HASH_ID,
    "value": VALUE,
    "caret": CARET_ID,
    "symbol": SYMBOL,
    "arrow": ARROW,
    "number": NUMBER,
    "bare": BARE,
    "punct": PUNCT,
    "meta_open": META_OPEN,
    "meta_close": META_CLOSE,
}


def tokenize(text: str, line: int = 1) -> list[Token]:
    """The tokens of one line (without its newline); comments are dropped."""
    tokens = []
    for match in _TOKEN.finditer(text):
        group = match.lastgroup
        if group is None or group == "comment":
            continue
        if group == "badstring":
            raise LexError(match.start() + 1, "unterminated string")
        tokens.append(Token(_KINDS[group], match.group(), line, match.start() + 1))
    return tokens


_ESCAPE = re.compile(r"\\(?:([0-9A-Fa-f]{2})|(.))")
_SIMPLE_ESCAPES = {'"': 0x22, "\\": 0x5C, "n": 0x0A, "t": 0x09}


def unescape(body: str) -> str:
    """The value of a string literal's body (between the quotes), as MLIR's lexer reads it:
    ``\\XX`` is a byte in hex, plus ``\\"``, ``\\\\``, ``\\n`` and ``\\t``. Bytes are decoded
    as UTF-8 (the printer escapes each byte of a non-ASCII character separately)."""
    if "\\" not in body:
        return body
    out = bytearray()
    pos = 0
    for match in _ESCAPE.finditer(body):
        out += body[pos : match.start()].encode("utf-8")
        hexpair, char = match.groups()
        if hexpair is not None:
            out.append(int(hexpair, 16))
        elif char in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[char])
        else:
            raise ValueError(f"unknown escape \\{char} in string")
        pos = match.end()
    out += body[pos:].encode("utf-8")
    return out.decode("utf-8", errors="replace")


def string_value(token: Token) -> str:
    """The value of a STRING token (raises ValueError on a bad escape)."""
    return unescape(token.text[1:-1])
