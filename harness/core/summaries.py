"""The summary catalog: lines in which a test runner or tool states its own verdict.

gtest and pytest summaries are understood by the classifier itself; ``configs/summaries.yaml``
adds everything else a lab's logs end with: ctest's and unittest's tallies, a workflow runner's
completion line, a tool's success line. Each entry: ``id`` (a slug), ``verdict`` (``pass``: the
whole run succeeded, e.g. a tally with no failures; ``fail``: it did not), ``pattern`` (a Python
regex with a literal of at least four characters, as for signatures), ``source`` and
``example`` (verbatim; the pattern must match it).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from harness.core.configs import config_path
from harness.core.errors import InputError
from harness.core.outcomes import Outcome
from harness.core.signatures import SLUG, LazyPattern, anchor_memo, anchors, checked_example, remember_anchors
from harness.core.yamlnodes import Fields, Node, load_file, parse_named


@dataclass(frozen=True)
class Summary:
    id: str
    verdict: Outcome  # PASS or FAIL
    pattern: LazyPattern
    source: str
    example: str


_KEYS = ("id", "verdict", "pattern", "source", "example")


@functools.lru_cache(maxsize=1)
def default_summaries() -> tuple[Summary, ...]:
    """The catalog in ``configs/summaries.yaml``, checked once per version of it
    (:mod:`harness.core.catalogcache`)."""
    from harness.core.catalogcache import cached

    code = (Path(__file__), Path(__file__).with_name("signatures.py"), Path(__file__).with_name("yamlnodes.py"))
    return cached(config_path("summaries.yaml"), code, load_summaries, _dump, _restore)


def _dump(summaries: tuple[Summary, ...]) -> dict:
    entries = [[s.id, s.verdict.value, s.pattern.pattern, s.source, s.example] for s in summaries]
    return {"summaries": entries, "anchors": anchor_memo([s.pattern for s in summaries])}


def _restore(data: dict) -> tuple[Summary, ...]:
    remember_anchors(data["anchors"])
    return tuple(Summary(i, Outcome(v), LazyPattern(p), source, example) for i, v, p, source, example in data["summaries"])


def load_summaries(path: str | Path) -> tuple[Summary, ...]:
    """Read and validate a summary catalog; every problem is reported as ``path:line:col``."""
    root = load_file(path)
    entries = Fields(root, "summary catalog", required=("summaries",)).req("summaries")
    summaries, _, problems = parse_named(entries.as_list("summaries"), _entry, lambda s: s.id, "summary id")
    if problems:
        raise InputError(problems)
    return tuple(summaries)


def _entry(node: Node) -> Summary:
    fields = Fields(node, "summary", required=_KEYS)
    id_node = fields.req("id")
    summary_id = id_node.as_str("summary id")
    if not SLUG.match(summary_id):
        raise id_node.fail(f"summary id {summary_id!r} must be a lowercase slug like 'ctest-all-passed'")
    verdict = Outcome(fields.req("verdict").as_choice("verdict", (Outcome.PASS.value, Outcome.FAIL.value)))
    pattern_node = fields.req("pattern")
    try:
        pattern = re.compile(pattern_node.as_str("pattern"))
        anchors(pattern)
    except (re.error, ValueError) as exc:
        raise pattern_node.fail(f"pattern: {exc}") from None
    example = checked_example(fields, pattern, summary_id)
    return Summary(summary_id, verdict, LazyPattern(pattern.pattern), fields.req("source").as_str("source"), example)
