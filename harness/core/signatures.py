"""The signature catalog: verbatim error strings that mean "the environment broke".

``configs/signatures.yaml`` lists one entry per string a driver, runtime or tool prints when
the environment (not the code under test) is at fault: ``id`` (a stable slug that reports and
dashboards key on), ``category`` (an :class:`EnvCategory` slug), ``severity`` (``fatal``: the
run cannot be trusted; ``warning``: context only, it never decides an outcome; ``wait``: a
progress line printed while waiting for a device lock or a link, context unless the run ends
still waiting), ``pattern`` (a Python regex), ``source`` (where the verbatim string comes from)
and ``example`` (the verbatim string itself; the loader checks that the pattern matches it).
Optional ``symptom_of`` lists the categories of causes the fatal string is a symptom of: when an
earlier line names one of them, the verdict follows that cause. Optional ``explains_crash``
(warnings only) marks a warning that is a failure in itself (a hugepage mapping that failed):
a crash that follows it in the same test, with no other failure between, is its fault.
Optional ``cause_follows`` (fatal only) marks a tool's wrapper line that prints the cause on
the lines after it (tt-smi's ``Error in detecting devices!``): a fatal line after it names the
fault, and the wrapper names it only when none does.

Matching many regexes against multi-GB logs is done by :class:`PatternSet`: every pattern
must contain a literal of at least :data:`MIN_ANCHOR` characters that any match includes
(an *anchor*, found automatically from the parsed regex). A fast search for the anchors finds
the few candidate lines; only those are decoded and run through the full regexes. A pattern
without such a literal is refused: signatures are specific verbatim strings, not keyword
guesses. The anchors are searched by one Aho-Corasick automaton (compiled, from the
``ahocorasick-rs`` wheel) where it is installed, whatever their number; the pure-Python search
used elsewhere is faster with patterns whose verbatim text has a capital letter, a bracket or a
quote in it (see :func:`_rare`).
"""

from __future__ import annotations

import enum
import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Hashable, Iterator, Sequence, TypeVar

from harness.core.configs import config_path
from harness.core.errors import InputError
from harness.core.outcomes import EnvCategory
from harness.core.yamlnodes import Fields, Node, load_file, parse_named

try:  # the regex parser is what finds the literals every match must contain
    from re import _parser as _sre  # Python >= 3.11
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse as _sre  # type: ignore[no-redef]

MIN_ANCHOR = 4  # shorter literals would make nearly every line a candidate
MAX_ANCHOR = 24  # longer anchors in the one combined search cost comparisons, filter no better
MAX_FIND = 64  # an anchor searched on its own: the longer, the faster bytes.find skips
MAX_AUTOMATON_ANCHOR = 32  # selective enough; longer ones only grow the automaton

SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


class LazyPattern:
    """A regex compiled on first use. The classifier loads hundreds of catalog patterns on every
    start and a small log tries a few; compiling them all was most of its start-up."""

    __slots__ = ("pattern", "flags", "_compiled")

    def __init__(self, pattern: str, flags: int = 0):
        self.pattern = pattern
        self.flags = flags
        self._compiled: re.Pattern[str] | None = None

    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self.pattern, self.flags)
        return self._compiled

    def search(self, string: str, *args: int) -> re.Match[str] | None:
        return self.compiled().search(string, *args)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LazyPattern) and (self.pattern, self.flags) == (other.pattern, other.flags)

    def __hash__(self) -> int:
        return hash((self.pattern, self.flags))

    def __repr__(self) -> str:
        return f"LazyPattern({self.pattern!r})"


class Severity(str, enum.Enum):
    FATAL = "fatal"
    WARNING = "warning"
    WAIT = "wait"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Signature:
    """One catalog entry, compiled."""

    id: str
    category: EnvCategory
    severity: Severity
    pattern: LazyPattern
    source: str
    example: str
    where: str = ""  # path:line of the entry in the catalog, for messages
    symptom_of: tuple[EnvCategory, ...] = ()  # causes an earlier line may name, most specific first
    explains_crash: bool = False  # a warning that makes a crash after it an env fault
    cause_follows: bool = False  # a wrapper line: a fatal line after it names the fault

    @property
    def fatal(self) -> bool:
        return self.severity is Severity.FATAL

    @property
    def wait(self) -> bool:
        return self.severity is Severity.WAIT


@dataclass(frozen=True)
class Catalog:
    """The signatures in catalog order: when several match one line, the earlier fatal one names it."""

    signatures: tuple[Signature, ...]

    def __iter__(self) -> Iterator[Signature]:
        return iter(self.signatures)

    def __len__(self) -> int:
        return len(self.signatures)

    def get(self, signature_id: str) -> Signature:
        for signature in self.signatures:
            if signature.id == signature_id:
                return signature
        raise KeyError(signature_id)

    def match_line(self, line: str) -> tuple[Signature, ...]:
        """Every signature matching one line, in catalog order."""
        return tuple(sig for sig, _ in _catalog_patterns(self).match(line))


@functools.lru_cache(maxsize=8)
def _catalog_patterns(catalog: Catalog) -> "PatternSet[Signature]":
    return PatternSet([(sig, sig.pattern) for sig in catalog])


# ---------------------------------------------------------------------------------------------
# Loading


@functools.lru_cache(maxsize=1)
def default_catalog() -> Catalog:
    """The catalog in ``configs/signatures.yaml`` (see :mod:`harness.core.configs`), checked
    once per version of it (:mod:`harness.core.catalogcache`)."""
    from harness.core.catalogcache import cached

    return cached(config_path("signatures.yaml"), _CODE, load_catalog, _dump, _restore)


_CODE = (Path(__file__), Path(__file__).with_name("outcomes.py"), Path(__file__).with_name("yamlnodes.py"))
_FIELDS = ("id", "category", "severity", "source", "example", "where")


def _dump(catalog: Catalog) -> dict:
    return {
        "signatures": [
            {
                **{key: str(getattr(sig, key)) for key in _FIELDS},
                "pattern": sig.pattern.pattern,
                "symptom_of": [str(c) for c in sig.symptom_of],
                "explains_crash": sig.explains_crash,
                "cause_follows": sig.cause_follows,
            }
            for sig in catalog
        ],
        "anchors": anchor_memo([sig.pattern for sig in catalog]),
    }


def _restore(data: dict) -> Catalog:
    remember_anchors(data["anchors"])
    return Catalog(
        tuple(
            Signature(
                id=entry["id"],
                category=EnvCategory(entry["category"]),
                severity=Severity(entry["severity"]),
                pattern=LazyPattern(entry["pattern"]),
                source=entry["source"],
                example=entry["example"],
                where=entry["where"],
                symptom_of=tuple(EnvCategory(c) for c in entry["symptom_of"]),
                explains_crash=bool(entry["explains_crash"]),
                cause_follows=bool(entry["cause_follows"]),
            )
            for entry in data["signatures"]
        )
    )


_ENTRY_KEYS = ("id", "category", "severity", "pattern", "source", "example")


def load_catalog(path: str | Path) -> Catalog:
    """Read, validate and compile a catalog; every problem is reported as ``path:line:col``."""
    root = load_file(path)
    entries = Fields(root, "signature catalog", required=("signatures",)).req("signatures")
    signatures, _, problems = parse_named(entries.as_list("signatures"), _entry, lambda s: s.id, "signature id")
    if problems:
        raise InputError(problems)
    if not signatures:
        raise entries.fail("the catalog has no signatures")
    return Catalog(tuple(signatures))


def _entry(node: Node) -> Signature:
    fields = Fields(node, "signature", required=_ENTRY_KEYS, optional=("symptom_of", "explains_crash", "cause_follows"))
    id_node = fields.req("id")
    signature_id = id_node.as_str("signature id")
    if not SLUG.match(signature_id):
        raise id_node.fail(f"signature id {signature_id!r} must be a lowercase slug like 'umd-no-chips'")
    category = EnvCategory(fields.req("category").as_choice("category", tuple(c.value for c in EnvCategory)))
    severity = Severity(fields.req("severity").as_choice("severity", tuple(s.value for s in Severity)))
    pattern_node = fields.req("pattern")
    text = pattern_node.as_str("pattern")
    try:
        pattern = re.compile(text)
    except re.error as exc:
        raise pattern_node.fail(f"pattern is not a valid regex: {exc}") from None
    try:
        anchors(pattern)
    except ValueError as exc:
        raise pattern_node.fail(str(exc)) from None
    example = checked_example(fields, pattern, signature_id)
    pattern = LazyPattern(text)  # checked; compiled again only if used
    symptom_of: tuple[EnvCategory, ...] = ()
    if (causes := fields.opt("symptom_of")) is not None:
        choices = tuple(c.value for c in EnvCategory)
        symptom_of = tuple(EnvCategory(item.as_choice("each item of symptom_of", choices)) for item in causes.as_list("symptom_of"))
        if severity is not Severity.FATAL:
            raise causes.fail("symptom_of is for fatal entries: a warning or a wait never decides")
    explains_crash = False
    if (explains := fields.opt("explains_crash")) is not None:
        explains_crash = explains.as_bool("explains_crash")
        if explains_crash and severity is not Severity.WARNING:
            raise explains.fail("explains_crash is for warnings: a fatal entry decides by itself")
    cause_follows = False
    if (follows := fields.opt("cause_follows")) is not None:
        cause_follows = follows.as_bool("cause_follows")
        if cause_follows and severity is not Severity.FATAL:
            raise follows.fail("cause_follows is for fatal entries")
    return Signature(
        id=signature_id,
        category=category,
        severity=severity,
        pattern=pattern,
        source=fields.req("source").as_str("source"),
        example=example,
        where=f"{node.path}:{node.line}",
        symptom_of=symptom_of,
        explains_crash=explains_crash,
        cause_follows=cause_follows,
    )


def checked_example(fields: Fields, pattern: re.Pattern[str], entry_id: str) -> str:
    """The entry's verbatim example, checked against its own pattern."""
    node = fields.req("example")
    example = node.as_str("example")
    if not pattern.search(example):
        raise node.fail(f"pattern of {entry_id!r} does not match its own example")
    return example


# ---------------------------------------------------------------------------------------------
# Anchors: literals that every match of a regex contains

_COMMON = frozenset("abcdefghijklmnopqrstuvwxyz0123456789 \t.,:;/-()|_=")
# Capitals most frequent in tt-logger lines (Device, Metal, UMD, ...) first: the engine tries a
# trie's top-level branches in order at every stop, so frequent stops should exit early.
_FREQUENT_FIRST = b"DMULPRTNOABEICSF"


def _rare(char: str) -> bool:
    """Whether log lines seldom contain ``char`` (capitals, brackets, quotes, non-ASCII). The regex engine stops at every character that starts an anchor, so anchors
    starting with a rare one are searched together in one pass; any other anchor costs a
    separate ``bytes.find`` pass over the log."""
    return char not in _COMMON


def _best_cut(literal: str, longest: bool = False) -> tuple[tuple, str] | None:
    """The best anchor inside one literal, with its score (any substring of a required literal
    is required too): for the pure-Python search, starting with a rare character first, then
    longer; for the automaton (``longest``), longer first: it searches every anchor in the one
    pass whatever its first character, and a short anchor like ``Device `` makes a fifth of a
    tt-metal log's lines candidates."""
    if len(literal) < MIN_ANCHOR:
        return None
    if longest:  # the first of the longest cuts that starts with a rare character, else the first
        width = min(MAX_AUTOMATON_ANCHOR, len(literal))
        starts = range(len(literal) - width + 1)
        start = next((start for start in starts if _rare(literal[start])), None)
        return ((width, True), literal[start : start + width]) if start is not None else ((width, False), literal[:width])
    best: tuple[tuple, str] | None = None
    for start in range(len(literal) - MIN_ANCHOR + 1):
        rare = _rare(literal[start])
        cut = literal[start : start + (MAX_ANCHOR if rare else MAX_FIND)]
        score = (rare, len(cut))
        if best is None or score > best[0]:
            best = (score, cut)
    return best


def _choose(options: list[tuple[str, ...]], longest: bool = False) -> tuple[str, ...] | None:
    """Of several alternative anchor sets (each: any match contains one of its literals),
    the one whose weakest literal makes the best anchor."""
    best: tuple[tuple, tuple[str, ...]] | None = None
    for option in options:
        cuts = [_best_cut(literal, longest) for literal in option]
        if any(cut is None for cut in cuts):
            continue
        score = min(cut[0] for cut in cuts)  # type: ignore[index]
        chosen = tuple(sorted({cut[1] for cut in cuts}))  # type: ignore[index]
        if best is None or score > best[0]:
            best = (score, chosen)
    return None if best is None else best[1]


_REPEATS = {_sre.MAX_REPEAT, _sre.MIN_REPEAT} | (
    {_sre.POSSESSIVE_REPEAT} if hasattr(_sre, "POSSESSIVE_REPEAT") else set()
)


_NEWLINE = ord("\n")  # never in an anchor: lines are searched, and no line holds one


def _options(items, longest: bool = False) -> list[tuple[str, ...]]:
    """Anchor sets of a parsed regex sequence: each a tuple of literals of which every match
    contains at least one."""
    options: list[tuple[str, ...]] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            options.append(("".join(run),))
            run.clear()

    for op, av in getattr(items, "data", items):  # a SubPattern's list: its __getitem__ is slow
        if op is _sre.LITERAL and av != _NEWLINE:
            run.append(chr(av))
        elif op in _REPEATS:
            low, high, sub = av
            if low >= 1 and len(sub) == 1 and sub[0][0] is _sre.LITERAL and sub[0][1] != _NEWLINE:
                run.append(chr(sub[0][1]) * min(low, MAX_ANCHOR))
                if high != low:
                    flush()
            else:
                flush()
                if low >= 1:
                    options.extend(_options(sub, longest))
        else:
            flush()
            if op is _sre.SUBPATTERN:
                _group, add_flags, _del_flags, sub = av
                if not add_flags & re.IGNORECASE:
                    options.extend(_options(sub, longest))
            elif op is getattr(_sre, "ATOMIC_GROUP", None):
                options.extend(_options(av, longest))
            elif op is _sre.BRANCH:
                chosen = [_choose(_options(branch, longest), longest) for branch in av[1]]
                if all(chosen):
                    options.append(tuple(sorted({lit for branch in chosen for lit in branch})))  # type: ignore[union-attr]
    flush()
    return options


@functools.lru_cache(maxsize=1024)  # the loader checks anchors, the PatternSet picks its own: parse once
def _parsed(pattern: re.Pattern[str]):
    return _sre.parse(pattern.pattern, pattern.flags)


_ANCHORS: dict[tuple[str, int, bool], tuple[str, ...]] = {}  # (pattern, flags, longest) -> anchors


def anchor_memo(patterns) -> list:
    """The anchors of ``patterns`` (both choices), as data to keep with a cached catalog."""
    return [[p.pattern, p.flags, list(anchors(p)), list(anchors(p, longest=True))] for p in patterns]


def remember_anchors(memo: list) -> None:
    """Take anchors computed by an earlier process (:func:`anchor_memo`) instead of parsing."""
    for pattern, flags, python, longest in memo:
        _ANCHORS[(pattern, flags, False)] = tuple(python)
        _ANCHORS[(pattern, flags, True)] = tuple(longest)


def anchors(pattern: re.Pattern[str] | LazyPattern, longest: bool = False) -> tuple[str, ...]:
    """Literals of which every match of ``pattern`` contains at least one (the prefilter's
    needles), chosen for the pure-Python search, or with ``longest`` for the automaton (see
    :func:`_best_cut`; either way a pattern has some or none). Raises ValueError for a pattern
    without a usable literal."""
    key = (pattern.pattern, pattern.flags, longest)
    if key in _ANCHORS:
        return _ANCHORS[key]
    if pattern.flags & re.IGNORECASE:
        raise ValueError("case-insensitive patterns are not supported: write the verbatim case, e.g. PCI[eE]")
    chosen = _choose(_options(_parsed(pattern), longest), longest)
    if chosen is None:
        raise ValueError(
            f"pattern needs a literal of at least {MIN_ANCHOR} characters that every match contains "
            "(signatures are verbatim strings, not keyword guesses)"
        )
    _ANCHORS[key] = chosen
    return chosen


# ---------------------------------------------------------------------------------------------
# Matching many patterns fast

K = TypeVar("K", bound=Hashable)


class PatternSet(Generic[K]):
    """Which of many keyed regexes match a line, found fast in huge texts.

    The anchors of all patterns are searched together; each line containing one (a
    *candidate*) is decoded and tried against the patterns whose anchors it contains. Two
    engines find the same anchors, so the same candidates and the same matches:

    - ``automaton`` (the default where the ``ahocorasick_rs`` wheel is installed): one
      Aho-Corasick automaton over every anchor, compiled code, a single pass at about the
      speed of ``grep -F``, whatever the number of anchors;
    - ``python``: anchors starting with a rare character are found by one search (a
      trie-shaped alternation, so the regex engine only stops at those characters); each other
      anchor by ``bytes.find``. About 4x slower, and each common anchor adds a pass.

    ``engine`` (default: ``$TT_HARNESS_PREFILTER``, else ``auto``) picks one; ``auto`` is the
    automaton when it can be imported, else Python.
    """

    def __init__(self, patterns: Sequence[tuple[K, re.Pattern[str]]], engine: str | None = None):
        self._patterns = tuple(patterns)
        automaton = _automaton_module(engine)
        by_anchor: dict[bytes, set[int]] = {}
        for index, (_, pattern) in enumerate(self._patterns):
            for anchor in anchors(pattern, longest=automaton is not None):
                by_anchor.setdefault(anchor.encode("utf-8"), set()).add(index)
        self._by_anchor = by_anchor
        words = sorted(by_anchor)
        self._automaton = (automaton.BytesAhoCorasick(words), words) if automaton is not None and words else None
        if self._automaton is not None:
            automaton, words = self._automaton
            self._ids = tuple(tuple(sorted(by_anchor[word])) for word in words)  # anchor number -> patterns
            self._find = automaton.find_matches_as_indexes
            self._find_big = None  # the same anchors as a DFA: for chunks of a log
        else:
            self._python()

    @property
    def engine(self) -> str:
        return "python" if self._automaton is None else "automaton"

    def _python(self) -> None:
        """The pure-Python engine's searches (compiling them costs start-up: only when used)."""
        by_anchor = self._by_anchor
        self._prefilter = re.compile(_trie_regex(sorted(by_anchor)))  # every anchor: for single lines
        self._rare = re.compile(_trie_regex(sorted(a for a in by_anchor if _rare(chr(a[0])))))
        self._common = tuple(sorted(a for a in by_anchor if not _rare(chr(a[0]))))
        # The search reports the longest anchor at a position; shorter anchors that are its
        # prefixes are present too.
        self._at: dict[bytes, tuple[int, ...]] = {
            anchor: tuple(sorted({i for other, ids in by_anchor.items() if anchor.startswith(other) for i in ids}))
            for anchor in by_anchor
        }

    def candidate_lines(self, buf: bytes, start: int, end: int) -> list[tuple[int, int]]:
        """(start, end) offsets of the lines in ``buf[start:end]`` containing any anchor, in
        order; ``end`` must be a line boundary."""
        if self._automaton is None:
            return self._python_candidate_lines(buf, start, end)
        find = self._find
        if end - start >= _DFA_FROM:
            if self._find_big is None:
                self._find_big = _dfa(self._automaton[1]).find_matches_as_indexes
            find = self._find_big
        lines = []
        line_end = -1
        # Non-overlapping matches come in text order. One can hide another anchor only where
        # they overlap, so on the same line (no anchor holds a newline): every line holding an
        # anchor holds a reported match.
        for _, found, _ in find(memoryview(buf)[start:end]):
            found += start
            if found > line_end:
                line = _line_at(buf, found, start, end)
                lines.append(line)
                line_end = line[1]
        return lines

    def _python_candidate_lines(self, buf: bytes, start: int, end: int) -> list[tuple[int, int]]:
        lines = set()
        search = self._rare.search
        pos = start
        while (found := search(buf, pos, end)) is not None:
            line = _line_at(buf, found.start(), start, end)
            lines.add(line)
            pos = line[1] + 1
        for needle in self._common:
            pos = buf.find(needle, start, end)
            while pos != -1:
                line = _line_at(buf, pos, start, end)
                lines.add(line)
                pos = buf.find(needle, line[1] + 1, end)
        return sorted(lines)

    def match(self, line: str, raw: bytes | None = None) -> list[tuple[K, re.Match[str]]]:
        """Every (key, match) for ``line``, in the order the patterns were given. ``raw`` is
        the line's UTF-8 bytes when the caller has them already."""
        raw = line.encode("utf-8", "replace") if raw is None else raw
        candidates: set[int] = set()
        if self._automaton is not None:
            ids = self._ids
            for anchor, _, _ in self._find(raw, overlapping=True):  # every anchor, overlapping too
                candidates.update(ids[anchor])
        else:
            search = self._prefilter.search
            found = search(raw)
            while found is not None:
                candidates.update(self._at[found.group()])
                found = search(raw, found.start() + 1)
        hits = []
        for index in sorted(candidates):
            key, pattern = self._patterns[index]
            matched = pattern.search(line)
            if matched is not None:
                hits.append((key, matched))
        return hits


PREFILTER_ENV = "TT_HARNESS_PREFILTER"
ENGINES = ("auto", "automaton", "python")


# A DFA searches a third faster than the default automaton (0.20 against 0.30 CPU-seconds per
# 100 MB of tt-metal log, 159 anchors) but takes ~2-4 ms to build: only for big texts.
_DFA_FROM = 1 << 20


def _dfa(words: list[bytes]):
    import ahocorasick_rs

    return ahocorasick_rs.BytesAhoCorasick(words, implementation=ahocorasick_rs.Implementation.DFA)


def _automaton_module(engine: str | None):
    """The ``ahocorasick_rs`` module for the ``automaton`` engine, or None for the Python one.
    An engine asked for by name must be there; ``$TT_HARNESS_PREFILTER`` (a knob for tests
    and benchmarks) is only a preference."""
    if engine is not None and engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    wanted = engine or os.environ.get(PREFILTER_ENV, "auto")
    if wanted == "python":
        return None
    try:
        import ahocorasick_rs
    except ImportError:
        if engine == "automaton":
            raise
        return None
    return ahocorasick_rs


def _stop_order(byte: int) -> tuple[int, int]:
    rank = _FREQUENT_FIRST.find(bytes([byte]))
    return (rank if rank != -1 else len(_FREQUENT_FIRST), byte)


def _line_at(buf: bytes, pos: int, start: int, end: int) -> tuple[int, int]:
    line_end = buf.find(b"\n", pos, end)
    return (buf.rfind(b"\n", start, pos) + 1 or start, end if line_end == -1 else line_end)


def _trie_regex(words: Sequence[bytes]) -> bytes:
    """One alternation for many literals, shaped as a trie: the regex engine tries one branch
    per distinct first byte instead of one per literal. Longer literals win at a position."""
    if not words:
        return b"(?!)"  # matches nothing
    trie: dict = {}
    for word in words:
        node = trie
        for byte in word:
            node = node.setdefault(byte, {})
        node[None] = True

    def emit(node: dict) -> bytes:
        children = sorted((byte for byte in node if byte is not None), key=_stop_order)
        branches = [re.escape(bytes([byte])) + emit(node[byte]) for byte in children]
        if not branches:
            return b""
        body = branches[0] if len(branches) == 1 else b"(?:" + b"|".join(branches) + b")"
        return b"(?:" + body + b")?" if None in node else body

    return emit(trie)
