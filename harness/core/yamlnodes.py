"""Safe YAML loading that remembers where every value came from.

Specs, inventories and catalogs are read through :func:`load`, which composes the YAML node
graph with PyYAML's *safe* loader (no Python tags, no arbitrary objects) and wraps every
value in a :class:`Node` carrying its line and column. That is what lets every later check
say ``path:line:col``. Duplicate keys and anchors/aliases that could explode are rejected here.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import yaml

from harness.core.errors import InputError, Problem
from harness.core.files import read_bounded
from harness.core.secretref import is_secret_ref

MAX_INPUT_BYTES = 4 * 1024 * 1024  # a job spec or inventory is a few KB; refuse anything huge


@dataclass(frozen=True)
class Node:
    """A YAML value with its location. ``value`` is a str/int/float/bool/None, a dict of
    str -> Node, or a list of Node."""

    value: Any
    path: str
    line: int
    col: int
    key_line: int = 0  # where the key of a mapping entry stood (0: not a mapping value)
    key_col: int = 0

    # -- location-aware errors -----------------------------------------------------------
    def problem(self, message: str) -> Problem:
        return Problem(self.path, self.line, self.col, message)

    def fail(self, message: str) -> InputError:
        return InputError([self.problem(message)])

    def key_problem(self, message: str) -> Problem:
        """A problem located at this value's key, e.g. an unknown key."""
        if self.key_line:
            return Problem(self.path, self.key_line, self.key_col, message)
        return self.problem(message)

    # -- typed accessors -----------------------------------------------------------------
    @property
    def is_map(self) -> bool:
        return isinstance(self.value, dict)

    def as_map(self, what: str) -> dict[str, "Node"]:
        if not isinstance(self.value, dict):
            raise self.fail(f"{what} must be a mapping, got {_kind(self.value)}")
        return self.value

    def as_list(self, what: str) -> list["Node"]:
        if not isinstance(self.value, list):
            raise self.fail(f"{what} must be a list, got {_kind(self.value)}")
        return self.value

    def as_str(self, what: str) -> str:
        if not isinstance(self.value, str) or not self.value.strip():
            raise self.fail(f"{what} must be a non-empty string, got {_kind(self.value)}")
        return self.value

    def as_int(self, what: str, minimum: int | None = None) -> int:
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            raise self.fail(f"{what} must be a whole number, got {_kind(self.value)}")
        if minimum is not None and self.value < minimum:
            raise self.fail(f"{what} must be at least {minimum}, got {self.value}")
        return self.value

    def as_bool(self, what: str) -> bool:
        if not isinstance(self.value, bool):
            raise self.fail(f"{what} must be true or false, got {_kind(self.value)}")
        return self.value

    def as_str_list(self, what: str) -> tuple[str, ...]:
        """A list of strings; a single string is accepted as a list of one."""
        if isinstance(self.value, str):
            return (self.as_str(what),)
        return tuple(item.as_str(f"each item of {what}") for item in self.as_list(what))

    def as_choice(self, what: str, choices: tuple[str, ...]) -> str:
        text = self.as_str(what)
        if text not in choices:
            raise self.fail(f"{what} must be one of {', '.join(choices)}, got {text!r}{did_you_mean(text, choices)}")
        return text

    def as_secret_ref(self, what: str) -> str:
        """Secrets are only ever ``${ENV_VAR}`` references, resolved at use time, never stored."""
        text = self.as_str(what)
        if not is_secret_ref(text):
            raise self.fail(
                f"{what} is a secret: write it as a ${{ENV_VAR}} reference and set the variable "
                "in the environment; literal secrets are not accepted in specs"
            )
        return text

    def to_python(self) -> Any:
        """Plain Python data, locations dropped."""
        if isinstance(self.value, dict):
            return {k: v.to_python() for k, v in self.value.items()}
        if isinstance(self.value, list):
            return [v.to_python() for v in self.value]
        return self.value


class Fields:
    """Reads the keys of one mapping, rejecting unknown ones with a did-you-mean.

    Usage::

        f = Fields(node, "check", required=("name", "kind"), optional=("timeout",))
        name = f.req("name").as_str("check name")
        timeout = f.opt("timeout")   # Node or None
    """

    def __init__(self, node: Node, what: str, required: tuple[str, ...] = (), optional: tuple[str, ...] = ()):
        self.node = node
        self.what = what
        self.map = node.as_map(what)
        known = required + optional
        problems = []
        for key, value in self.map.items():
            if key not in known:
                problems.append(value.key_problem(f"unknown key {key!r} in {what}{did_you_mean(key, known)}"))
        for key in required:
            if key not in self.map:
                problems.append(node.problem(f"{what} is missing required key {key!r}"))
        if problems:
            raise InputError(problems)

    def req(self, key: str) -> Node:
        return self.map[key]

    def opt(self, key: str) -> Node | None:
        node = self.map.get(key)
        return None if node is None or node.value is None else node

    def has(self, key: str) -> bool:
        return self.opt(key) is not None

    def key_node(self, key: str) -> Node:
        """The node for ``key`` if present, else the mapping itself (for locating errors)."""
        return self.map.get(key, self.node)

    def __iter__(self) -> Iterator[str]:
        return iter(self.map)


T = TypeVar("T")


def parse_named(
    items: list[Node], parse: Callable[[Node], T], name_of: Callable[[T], str], what: str
) -> tuple[list[T], dict[str, Node], list[Problem]]:
    """Parse every item of a list, collecting problems instead of stopping at the first, and
    refusing a name given twice. Returns the items, each name's node, and the problems."""
    parsed: list[T] = []
    nodes: dict[str, Node] = {}
    problems: list[Problem] = []
    for node in items:
        try:
            item = parse(node)
        except InputError as exc:
            problems.extend(exc.problems)
            continue
        name = name_of(item)
        if name in nodes:
            problems.append(node.problem(f"duplicate {what} {name!r} (first at line {nodes[name].line})"))
            continue
        nodes[name] = node
        parsed.append(item)
    return parsed, nodes, problems


def did_you_mean(word: str, choices: tuple[str, ...] | list[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return f"{str(value).lower()}"
    if isinstance(value, str):
        return f"the string {value!r}"
    return f"{value!r}"


# ---------------------------------------------------------------------------------------------
# Loading


def load_file(path: str | Path) -> Node:
    """Read and compose one YAML document from ``path``; every failure is an :class:`InputError`."""
    shown = str(path)
    data = read_bounded(path, MAX_INPUT_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError.at(shown, 1, 1, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return load_text(text, shown)


def load_text(text: str, path: str) -> Node:
    root = _compose_fast(text)
    if root is not None:
        return _convert(root, path)
    return _load_reference(text, path)


def _load_reference(text: str, path: str) -> Node:
    """The pure-Python loader: the reference for what is accepted and for every message."""
    try:
        _refuse_aliases(text, path)
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except RecursionError:
        raise InputError.at(path, 1, 1, "the YAML is nested too deeply (hundreds of levels): specs need a few") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        raise InputError.at(path, line, col, f"invalid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise InputError.at(path, 1, 1, f"invalid YAML: {exc}") from None
    if root is None:
        raise InputError.at(path, 1, 1, "the file is empty")
    try:
        return _convert(root, path)
    except RecursionError:
        raise InputError.at(path, 1, 1, "the YAML is nested too deeply (hundreds of levels): specs need a few") from None


# libyaml (PyYAML's C extension, in its wheels) composes a document ~15x faster than the pure
# Python loader: the signature catalog that `harness classify` reads on every call takes ~5 ms
# instead of ~65 ms. It is used only for what it decides alike: a single document without
# aliases, nested no deeper than _FAST_DEPTH, that it accepts. Everything else (every error,
# every alias, a deep or multi-document text) goes the pure-Python way, whose messages and
# checks stay the reference; tests/test_yamlnodes.py holds the two to the same trees.
_CLOADER = getattr(yaml, "CSafeLoader", None)
_FAST_DEPTH = 64  # far deeper than any spec; the C composer recurses without Python's guard
# What the two loaders read differently, found by tests/test_yamlnodes.py: libyaml accepts a tab
# after a value and a comment right after a block scalar's `|` or `>`, where PyYAML refuses
# them; a byte-order mark inside the text, and the Unicode line breaks, move its marks.
_ODD = re.compile("[\t\ufeff\x85\u2028\u2029]|[|>][-+0-9]*#")
_OPENS = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSES = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


def _compose_fast(text: str) -> yaml.Node | None:
    """The node graph of ``text`` composed by libyaml, or None when the pure-Python loader
    must read it (see above)."""
    if _CLOADER is None or _ODD.search(text):
        return None
    depth = documents = 0
    try:
        for event in yaml.parse(text, Loader=_CLOADER):  # events: flat, however deep the text
            if isinstance(event, _OPENS):
                depth += 1
                if depth > _FAST_DEPTH:
                    return None
            elif isinstance(event, _CLOSES):
                depth -= 1
            elif isinstance(event, yaml.AliasEvent):
                return None
            elif isinstance(event, yaml.ScalarEvent) and not event.value and event.style not in ("'", '"'):
                return None  # an empty value: libyaml places it elsewhere (and messages quote its place)
            elif isinstance(event, yaml.DocumentStartEvent):
                documents += 1
                if documents > 1:
                    return None
        return yaml.compose(text, Loader=_CLOADER) if documents else None
    except Exception:  # noqa: BLE001 - whatever libyaml refuses, the reference loader judges
        return None


_PLAIN_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "seq", "map")
)
_CONSTRUCTOR = yaml.SafeLoader("")  # only used to turn scalar nodes into Python values safely


def _refuse_aliases(text: str, path: str) -> None:
    """Every alias, of a scalar too, is refused where it stands: a few of them can expand a
    small spec into gigabytes ("billion laughs"), and specs have no need of them."""
    for token in yaml.scan(text, Loader=yaml.SafeLoader):
        if isinstance(token, yaml.AliasToken):
            mark = token.start_mark
            raise InputError.at(
                path, mark.line + 1, mark.column + 1,
                f"YAML alias *{token.value} is not supported in specs: write the value out",
            )


def _convert(node: yaml.Node, path: str, key_pos: tuple[int, int] = (0, 0)) -> Node:
    line, col = node.start_mark.line + 1, node.start_mark.column + 1
    if node.tag == "tag:yaml.org,2002:timestamp" and isinstance(node, yaml.ScalarNode):
        return Node(node.value, path, line, col, *key_pos)  # a date-like ref or version stays text
    if node.tag not in _PLAIN_TAGS:
        raise InputError.at(path, line, col, f"invalid YAML: tag {node.tag!r} is not allowed (plain data only)")
    if isinstance(node, yaml.ScalarNode):
        try:
            value = _CONSTRUCTOR.construct_object(node, deep=True)
        except yaml.YAMLError as exc:
            raise InputError.at(path, line, col, f"invalid value: {exc}") from None
        return Node(value, path, line, col, *key_pos)
    if isinstance(node, yaml.SequenceNode):
        return Node([_convert(item, path) for item in node.value], path, line, col, *key_pos)
    if isinstance(node, yaml.MappingNode):
        result: dict[str, Node] = {}
        for key_node, value_node in node.value:
            key_line, key_col = key_node.start_mark.line + 1, key_node.start_mark.column + 1
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                raise InputError.at(path, key_line, key_col, "keys must be plain strings (no merge keys or complex keys)")
            key = str(key_node.value)
            if key in result:
                first = result[key]
                raise InputError.at(
                    path, key_line, key_col, f"duplicate key {key!r} (first defined at line {first.line})"
                )
            result[key] = _convert(value_node, path, (key_line, key_col))
        return Node(result, path, line, col, *key_pos)
    raise InputError.at(path, line, col, f"unsupported YAML node {type(node).__name__}")
