"""The two anchor-search engines (compiled Aho-Corasick, pure Python) find the same matches, so
the classifier gives the same verdicts with either (their anchors differ, so do the lines they
look at twice and drop: each engine's anchors suit its search); and the chunked scanner
numbers and cuts lines exactly as the reference scanner below (the one it replaced, which
copied every chunk behind the unfinished line before it)."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import harness.core.classifier as classifier
from harness.core.classifier import classify_file, classify_log
from harness.core.signatures import ENGINES, PREFILTER_ENV, PatternSet, anchors, default_catalog

LOGS = Path(__file__).parent / "data" / "logs"
CATALOG = default_catalog()
KEYED = [(s.id, s.pattern) for s in CATALOG] + [(m, re.compile(m.value)) for m in classifier._Marker]
ENGINE_SETS = {engine: PatternSet(KEYED, engine=engine) for engine in ("automaton", "python")}
POOL = [s.example for s in CATALOG] + [
    "[ RUN      ] Suite.T1",
    "[       OK ] Suite.T1 (1 ms)",
    "[  FAILED  ] Suite.T2 (1 ms)",
    "[  PASSED  ] 3 tests.",
    "t.cpp:12: Failure",
    "E   AssertionError: café",
    "==== 1 failed, 2 passed in 0.12s ====",
    "______________ test_one ______________",
    "2025-11-07 21:59:20.155 | info     |          Device | Opening user mode device driver (tt_cluster.cpp:197)",
    "plain text with device and failed and passed words",
    "NOC0 appears hung: you should reset the board. Read 0xffffffff from PCIE: you should reset the board.",
    "No chips detected in the clusterNo chips detected in the cluster",
    "",
]


def test_both_engines_are_here():
    """The automaton is installed with the project here (Linux x86_64): both engines are tested."""
    assert ENGINE_SETS["automaton"].engine == "automaton"
    assert ENGINE_SETS["python"].engine == "python"


def test_the_automaton_takes_long_anchors_where_the_python_search_takes_rare_first_letters():
    """`Device \\d+ timed out waiting for ethernet channel`: `Device ` is on most tt-metal log
    lines; for the automaton, any anchor costs the same, so it takes the long one."""
    pattern = re.compile(r"Device \d+ timed out waiting for ethernet channel \d+ to train")
    assert anchors(pattern) == ("Device ",)
    assert anchors(pattern, longest=True) == (" timed out waiting for ethernet ",)
    line = b"2025-11-07 21:00:00.000 | info     |          Device | Opening user mode device driver\n"
    assert PatternSet([("eth", pattern)], engine="automaton").candidate_lines(line, 0, len(line) - 1) == []


def test_an_unknown_engine_is_refused_and_the_environment_only_prefers(monkeypatch):
    with pytest.raises(ValueError, match="engine must be one of"):
        PatternSet(KEYED, engine="fast")
    assert set(ENGINES) == {"auto", "automaton", "python"}
    monkeypatch.setenv(PREFILTER_ENV, "python")
    assert PatternSet(KEYED).engine == "python"
    monkeypatch.setenv(PREFILTER_ENV, "nonsense")
    assert PatternSet(KEYED).engine == "automaton"


def truth(lines: list[str]) -> dict[int, list]:
    return {
        number: [key for key, pattern in KEYED if pattern.search(line)]
        for number, line in enumerate(lines)
        if any(pattern.search(line) for _, pattern in KEYED)
    }


def found(matcher: PatternSet, buf: bytes) -> tuple[list, dict[int, list]]:
    spans = matcher.candidate_lines(buf, 0, len(buf))
    hits = {}
    for start, stop in spans:
        raw = buf[start:stop]
        keys = [key for key, _ in matcher.match(raw.decode("utf-8", "replace"), raw)]
        if keys:
            hits[buf.count(b"\n", 0, start)] = keys
    return spans, hits


_TEXT = st.one_of(
    st.sampled_from(POOL),
    st.text(st.characters(blacklist_characters="\n"), max_size=40),
    st.tuples(st.sampled_from(POOL), st.sampled_from(POOL), st.text(max_size=5).map(lambda t: t.replace("\n", ""))).map(
        lambda parts: parts[2].join(parts[:2])  # two hits on one line, maybe overlapping
    ),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_TEXT, min_size=1, max_size=60))
def test_engines_find_exactly_the_lines_the_regexes_match(lines):
    buf = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
    lines = buf.decode("utf-8", "replace").split("\n")[:-1]
    results = {engine: found(matcher, buf) for engine, matcher in ENGINE_SETS.items()}
    assert results["automaton"][1] == results["python"][1] == truth(lines)


def test_engines_agree_on_a_big_shuffled_mix():
    rng = random.Random(99)
    lines = [rng.choice(POOL) for _ in range(20000)]
    buf = ("\n".join(lines) + "\n").encode()
    automaton, python = (found(ENGINE_SETS[e], buf)[1] for e in ("automaton", "python"))
    assert automaton == python == truth(lines)


# ---------------------------------------------------------------------------------------------
# The chunked scanner


class ReferenceScanner:
    """The scanner before it stopped copying chunks: the reference for numbers and pieces."""

    def __init__(self, patterns: PatternSet, carry: bytes = b"") -> None:
        self.patterns = patterns
        self.carry = carry
        self.line = 1

    def feed(self, data: bytes) -> Iterator[tuple[int, bytes]]:
        buf = self.carry + data if self.carry else data
        cut = buf.rfind(b"\n") + 1
        if cut == 0:
            if len(buf) < classifier._MAX_LINE:
                self.carry = buf
                return
            yield from self._lines(buf, len(buf))
            self.carry = buf[-(classifier._MAX_LINE // 4) :]
            return
        yield from self._lines(buf, cut)
        self.carry = buf[cut:]

    def finish(self) -> Iterator[tuple[int, bytes]]:
        if self.carry:
            yield from self._lines(self.carry, len(self.carry))

    def _lines(self, buf: bytes, end: int) -> Iterator[tuple[int, bytes]]:
        position = 0
        for start, stop in self.patterns.candidate_lines(buf, 0, end):
            self.line += buf.count(b"\n", position, start)
            yield self.line, buf[start:stop]
            position = start
        self.line += buf.count(b"\n", position, end)


def scan(scanner, chunks: list[bytes]) -> list:
    out = [found for data in chunks for found in scanner.feed(data)]
    return out + list(scanner.finish())


def random_log(rng: random.Random, max_line: int) -> bytes:
    out = bytearray()
    for _ in range(rng.randrange(40, 200)):  # enough lines that every seed has candidates to compare
        roll = rng.random()
        if roll < 0.05:  # an overlong line, with a hit somewhere in it
            out += b"y" * rng.randrange(max_line // 2, 3 * max_line) + rng.choice(POOL).encode() + b"z" * rng.randrange(max_line)
        elif roll < 0.5:
            out += rng.choice(POOL).encode()
        else:
            out += b"2025-11-07 | debug | Metal | Allocated L1 buffer at 0x%x caf\xc3\xa9 \xff" % rng.randrange(1 << 32)
        out += rng.choice((b"\n", b"\n", b"\r\n"))
    if rng.random() < 0.5:
        out += rng.choice(POOL).encode()  # a last line without a newline
    return bytes(out)


@pytest.mark.parametrize("engine", ["automaton", "python"])
@pytest.mark.parametrize("seed", range(12))
def test_the_scanner_numbers_and_cuts_lines_as_the_reference(monkeypatch, engine, seed):
    monkeypatch.setattr(classifier, "_MAX_LINE", 512)
    rng = random.Random(seed)
    data = random_log(rng, 512)
    chunks, at = [], 0
    while at < len(data):
        size = rng.choice((1, 7, 64, 300, 513, 1500, 5000))
        chunks.append(data[at : at + size])
        at += size
    matcher = ENGINE_SETS[engine]
    expected = scan(ReferenceScanner(matcher), chunks)
    assert len(expected) > 5
    assert scan(classifier._Scanner(matcher), chunks) == expected
    assert scan(classifier._Scanner(matcher, b"carried "), chunks) == scan(ReferenceScanner(matcher, b"carried "), chunks)


# ---------------------------------------------------------------------------------------------
# Whole verdicts


@pytest.fixture
def engine_verdicts(monkeypatch):
    """classify with one engine, then the other: (engine -> verdict) for a callable."""

    def run(classify) -> dict:
        verdicts = {}
        for engine in ("automaton", "python"):
            monkeypatch.setenv(PREFILTER_ENV, engine)
            classifier._patterns.cache_clear()
            verdicts[engine] = classify()
        classifier._patterns.cache_clear()
        return verdicts

    yield run
    classifier._patterns.cache_clear()


TRANSCRIPTS = sorted([*LOGS.glob("*.log"), *(LOGS.parent / "corpus").rglob("*.log")])


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=lambda p: str(p.relative_to(LOGS.parent)))
def test_every_transcript_gets_the_same_verdict_from_both_engines(path, engine_verdicts):
    verdicts = engine_verdicts(lambda: classify_file(path))
    assert verdicts["automaton"] == verdicts["python"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(_TEXT, max_size=80))
def test_random_logs_get_the_same_verdict_from_both_engines(engine_verdicts, lines):
    verdicts = engine_verdicts(lambda: classify_log(lines))
    assert verdicts["automaton"] == verdicts["python"]
