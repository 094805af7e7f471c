"""One self-contained HTML page about a run, for people to look at.

The run's host x check matrix coloured by outcome (an environment fault in its own hue and
hatching, labelled ``env_fault/<category>``, so it never reads as a red failure), each cell linked
to its cases' messages, evidence lines and logs; and, over the last runs of the suite, a pass-rate
trend per check and an env-fault trend per host as inline SVG plots.

Pure: it takes :class:`RunInfo` / :class:`CaseRecord` values and returns a string. Viewing it
needs no network (inline CSS, inline SVG, no script, no font or image fetched); every string
that came from a run is escaped; its size is bounded however large the run is (names, messages,
evidence lines and cases per cell are capped).
"""

from __future__ import annotations

import html
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence
from urllib.parse import quote

from harness.core.matrix import PRECEDENCE, cell_word, worst_outcome
from harness.core.outcomes import Outcome, summarize
from harness.core.records import CaseRecord, RunInfo

# Bounds: a 60 MB test name or a log of a million evidence lines must not make a 1 GB page.
MAX_NAME = 200  # characters of a host, check, case or run name shown
MAX_MESSAGE = 2000  # characters of a case's message
MAX_EVIDENCE = 12  # evidence lines shown per case
MAX_EVIDENCE_LINE = 500  # characters per evidence line
MAX_CASES_PER_CELL = 100  # cases detailed per cell (the rest are counted)
MAX_PATH = 1000  # characters of a log path

# What each outcome is called on the page (the words of harness/core/matrix.py) and what it means.
LEGEND: tuple[tuple[Outcome, str, str], ...] = (
    (Outcome.PASS, "pass", "passed"),
    (Outcome.FAIL, "FAIL", "a real failure of the code under test"),
    (Outcome.ENV_FAULT, "env_fault/…", "the environment broke (card, driver, mounts, host): not the code"),
    (Outcome.ERROR, "ERROR", "the harness or the job spec broke"),
    (Outcome.XFAIL, "known bug", "failed as a declared known bug expects"),
    (Outcome.XPASS, "XPASS", "a known bug passed: close the bug"),
    (Outcome.FLAKY, "flaky", "passed and failed over repeats"),
    (Outcome.SKIP, "skip", "skipped"),
)

EXIT_MEANINGS = {
    0: "all passed",
    1: "a real failure, an xpass or a harness error",
    2: "usage or input error: nothing ran",
    3: "environment faults, no real failure",
    130: "interrupted (Ctrl-C)",
    143: "terminated (SIGTERM)",
}

# Outcomes that say something about the code: the pass rate's denominator. Env faults, harness
# errors and skips say nothing about it, so they neither raise nor lower a check's pass rate.
_JUDGED = frozenset({Outcome.PASS, Outcome.XFAIL, Outcome.FAIL, Outcome.XPASS, Outcome.FLAKY})
_AS_EXPECTED = frozenset({Outcome.PASS, Outcome.XFAIL})

# A host is a STAND-IN (the simulated lab, harness/lab) when its name, board or ref, or the run's
# ref, carries the lab's mark: the lab's hosts are `<lab>-wh-NN` with lab `sim` by default, its
# image project is `tt-metal-sim`.
_STAND_IN = re.compile(r"(?<![a-z0-9])(sim|simulated|stand-?in)(?![a-z0-9])", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


# ---------------------------------------------------------------------------------------------
# Trends (data first, drawing after)


@dataclass(frozen=True)
class TrendPoint:
    run_id: str
    started: str
    value: float | None  # 0..1; None when the run said nothing about it
    label: str  # what the point means, in words ("4/5 as expected")


def pass_rate_trend(runs: Sequence[RunInfo], cases: Iterable[CaseRecord]) -> dict[str, tuple[TrendPoint, ...]]:
    """Per check, oldest run first: the share of its cases that came out as expected (pass or
    known bug) among those that said something about the code."""
    judged: dict[tuple[str, str], Counter] = defaultdict(Counter)
    checks: dict[str, None] = {}
    for case in cases:
        checks.setdefault(case.check)
        judged[case.run_id, case.check][case.outcome] += 1
    trend = {}
    for check in checks:
        points = []
        for run in reversed(runs):
            counts = judged.get((run.run_id, check), Counter())
            total = sum(n for outcome, n in counts.items() if outcome in _JUDGED)
            ok = sum(n for outcome, n in counts.items() if outcome in _AS_EXPECTED)
            faults = counts[Outcome.ENV_FAULT] + counts[Outcome.ERROR]
            if total:
                label = f"{ok}/{total} as expected" + (f", {faults} env fault/error left out" if faults else "")
                points.append(TrendPoint(run.run_id, run.started, ok / total, label))
            else:
                label = f"no verdict on the code ({faults} env fault/error)" if faults else "not run"
                points.append(TrendPoint(run.run_id, run.started, None, label))
        trend[check] = tuple(points)
    return trend


def env_fault_trend(runs: Sequence[RunInfo], cases: Iterable[CaseRecord]) -> dict[str, tuple[TrendPoint, ...]]:
    """Per host, oldest run first: the share of its cases that were environment faults, with the
    categories seen."""
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    categories: dict[tuple[str, str], set[str]] = defaultdict(set)
    hosts: dict[str, None] = {}
    for case in cases:
        hosts.setdefault(case.host)
        entry = counts[case.run_id, case.host]
        entry[1] += 1
        if case.outcome is Outcome.ENV_FAULT:
            entry[0] += 1
            categories[case.run_id, case.host].add(case.category or "unknown")
    trend = {}
    for host in sorted(hosts, key=_natural):
        points = []
        for run in reversed(runs):
            faults, total = counts.get((run.run_id, host), (0, 0))
            if total:
                seen = categories.get((run.run_id, host))
                label = f"{faults}/{total} cases env faults" + (f" ({', '.join(sorted(seen))})" if seen else "")
                points.append(TrendPoint(run.run_id, run.started, faults / total, label))
            else:
                points.append(TrendPoint(run.run_id, run.started, None, "no cases on this host"))
        trend[host] = tuple(points)
    return trend


def stand_in_hosts(run: RunInfo, cases: Iterable[CaseRecord]) -> frozenset[str]:
    """The hosts of ``cases`` that are STAND-INs of the simulated lab, to be labelled as such."""
    whole_run = bool(_STAND_IN.search(run.ref))
    found = set()
    for case in cases:
        if whole_run or any(_STAND_IN.search(text) for text in (case.host, case.board, case.ref)):
            found.add(case.host)
    return frozenset(found)


# ---------------------------------------------------------------------------------------------
# The page


def render_report(
    run: RunInfo,
    cases: Sequence[CaseRecord],
    trend_runs: Sequence[RunInfo] = (),
    trend_cases: Sequence[CaseRecord] = (),
    *,
    log_base: str = "",
    generated: str = "",
) -> str:
    """The page for ``run`` (its ``cases``), with trends over ``trend_runs`` (newest first, as
    the history returns them) and their ``trend_cases``. Log links are ``log_base`` + each case's
    ``log`` (relative to the run's output directory): with the default, the page is meant to sit
    in that directory. ``generated`` (a timestamp) is shown as given: the renderer has no clock."""
    cases = [case for case in cases if case.run_id == run.run_id]
    stand_ins = stand_in_hosts(run, cases)
    hosts = sorted({case.host for case in cases}, key=_natural)
    checks = list(dict.fromkeys(case.check for case in cases))
    grid: dict[tuple[str, str], list[CaseRecord]] = defaultdict(list)
    for case in cases:
        grid[case.host, case.check].append(case)
    host_index = {host: i for i, host in enumerate(hosts)}
    check_index = {check: i for i, check in enumerate(checks)}
    anchors = {(h, c): f"cell-{host_index[h]}-{check_index[c]}" for h, c in grid}

    parts = [
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
        f"<title>{_e(run.suite)} · run {_e(run.run_id)} · tt-harness</title>\n",
        f"<style>{_CSS}</style>\n</head>\n<body>\n",
        _header(run, cases, stand_ins, generated),
        _matrix(hosts, checks, grid, anchors, stand_ins),
        _glance(hosts, checks, grid, anchors),
        _trends(run, trend_runs, trend_cases),
        _details(hosts, checks, grid, anchors, stand_ins, log_base),
        "<footer>tt-harness report: one self-contained file (no script, no network). Pass rate counts "
        "pass and known bug as expected, over the cases that judged the code; env faults, harness "
        "errors and skips are left out of it.</footer>\n</body>\n</html>\n",
    ]
    return "".join(parts)


def _header(run: RunInfo, cases: Sequence[CaseRecord], stand_ins: frozenset[str], generated: str) -> str:
    meta = [f"started {_e(run.started)}"]
    if run.finished:
        meta.append(f"finished {_e(run.finished)}")
    if run.exit_code is not None:
        meaning = EXIT_MEANINGS.get(run.exit_code, "")
        meta.append(f"exit <b>{run.exit_code}</b>" + (f" ({_e(meaning)})" if meaning else ""))
    if run.image_digest:
        meta.append(f"image <code title=\"{_e(run.image_digest)}\">{_e(_short_digest(run.image_digest))}</code>")
    if run.ref:
        meta.append(f"ref <code>{_e(run.ref)}</code>")
    if generated:
        meta.append(f"report generated {_e(generated)}")
    counts = summarize(case.outcome for case in cases)
    chips = "".join(
        f"<span class=\"chip o-{outcome.value}\">{_e(word)} <b>{counts[outcome.value]}</b></span>"
        for outcome, word, _ in LEGEND
        if counts[outcome.value]
    )
    out = [
        "<header>\n",
        f"<h1>{_e(run.suite)} <span class=\"run-id\">run {_e(run.run_id)}</span></h1>\n",
        f"<p class=\"meta\">{' · '.join(meta)}</p>\n",
        f"<p class=\"counts\">{len(cases)} cases: {chips}</p>\n",
    ]
    if stand_ins:
        names = ", ".join(_e(host) for host in sorted(stand_ins, key=_natural))
        out.append(
            "<p class=\"stand-in-note\"><b>STAND-IN hosts</b> (the simulated lab: no Tenstorrent card, "
            f"devices computed on the CPU): {names}. Their results show the harness at work, not silicon.</p>\n"
        )
    out.append("</header>\n")
    return "".join(out)


def _glance(
    hosts: Sequence[str],
    checks: Sequence[str],
    grid: Mapping[tuple[str, str], Sequence[CaseRecord]],
    anchors: Mapping[tuple[str, str], str],
) -> str:
    """What needs a person, in words: the real failures by check, the env faults by host."""
    def link(key: tuple[str, str], text: str) -> str:
        return f"<a href=\"#{anchors[key]}\">{_e(text)}</a>"

    failing = {Outcome.FAIL: "failed", Outcome.XPASS: "passed but is a known bug", Outcome.ERROR: "harness error"}
    lines = []
    for check in checks:
        for outcome, verb in failing.items():
            where = [host for host in hosts if any(c.outcome is outcome for c in grid.get((host, check), ()))]
            if where:
                lines.append(
                    f"<li class=\"o-{outcome.value}-edge\"><b>{_e(check)}</b> {verb} on "
                    + ", ".join(link((host, check), host) for host in where) + "</li>"
                )
    for host in hosts:
        faulted = [check for check in checks if any(c.outcome is Outcome.ENV_FAULT for c in grid.get((host, check), ()))]
        if faulted:
            categories = sorted({c.category or "unknown" for check in faulted for c in grid[host, check] if c.outcome is Outcome.ENV_FAULT})
            lines.append(
                f"<li class=\"o-env_fault-edge\"><b>{_e(host)}</b>: environment fault ({_e(', '.join(categories))}) in "
                + ", ".join(link((host, check), check) for check in faulted) + "</li>"
            )
    known = [check for check in checks if any(c.outcome is Outcome.XFAIL for h in hosts for c in grid.get((h, check), ()))]
    if known:
        lines.append(
            "<li class=\"o-xfail-edge\">known bug still failing as expected: "
            + ", ".join(_e(check) for check in known) + "</li>"
        )
    if not lines:
        return ""
    return "<section id=\"glance\"><h2>What needs a look</h2><ul class=\"glance\">" + "".join(lines) + "</ul></section>\n"


def _matrix(
    hosts: Sequence[str],
    checks: Sequence[str],
    grid: Mapping[tuple[str, str], Sequence[CaseRecord]],
    anchors: Mapping[tuple[str, str], str],
    stand_ins: frozenset[str],
) -> str:
    out = ["<section id=\"matrix\">\n<h2>Host × check</h2>\n"]
    if not hosts:
        out.append("<p class=\"empty\">This run recorded no cases.</p>\n</section>\n")
        return "".join(out)
    out.append("<div class=\"scroll\"><table class=\"matrix\">\n<thead><tr><th class=\"corner\">host</th>")
    out.extend(f"<th scope=\"col\" class=\"check\">{_e(check)}</th>" for check in checks)
    out.append("</tr></thead>\n<tbody>\n")
    boards: dict[str, set[str]] = defaultdict(set)
    for (host, _), cell_cases in grid.items():
        boards[host].update(case.board for case in cell_cases if case.board)
    for host in hosts:
        out.append(f"<tr><th scope=\"row\" class=\"host\">{_e(host)}")
        if host in stand_ins:
            out.append(" <span class=\"badge stand-in\">stand-in</span>")
        if boards[host]:
            out.append(f"<br><small>{_e(', '.join(sorted(boards[host])))}</small>")
        out.append("</th>")
        for check in checks:
            cell_cases = grid.get((host, check))
            if not cell_cases:
                out.append("<td class=\"cell o-none\"><span>-</span></td>")
                continue
            worst = worst_outcome(case.outcome for case in cell_cases)
            word = cell_word([(case.outcome, case.category) for case in cell_cases])
            tip = _cell_tip(cell_cases)
            out.append(
                f"<td class=\"cell o-{worst.value}\" data-host=\"{_e(host)}\" data-check=\"{_e(check)}\">"
                f"<a href=\"#{anchors[host, check]}\" title=\"{_e(tip, MAX_MESSAGE)}\">{_e(word)}</a></td>"
            )
        out.append("</tr>\n")
    out.append("</tbody>\n</table></div>\n<ul class=\"legend\">")
    out.extend(
        f"<li><span class=\"swatch o-{outcome.value}\">{_e(word)}</span> {_e(meaning)}</li>"
        for outcome, word, meaning in LEGEND
    )
    out.append("</ul>\n</section>\n")
    return "".join(out)


def _cell_tip(cases: Sequence[CaseRecord]) -> str:
    """The first message of the worst cases, for a cell's hover text."""
    worst = worst_outcome(case.outcome for case in cases)
    message = next((case.message for case in cases if case.outcome is worst and case.message), "")
    return f"{len(cases)} case{'s' if len(cases) != 1 else ''}" + (f": {message}" if message else "")


def _trends(run: RunInfo, runs: Sequence[RunInfo], cases: Sequence[CaseRecord]) -> str:
    out = ["<section id=\"trends\">\n"]
    if not runs:
        out.append("<h2>Trends</h2>\n<p class=\"empty\">No runs of this suite in the history yet.</p>\n</section>\n")
        return "".join(out)
    window = f"{len(runs)} run{'s' if len(runs) != 1 else ''}"
    span = f"{_e(runs[-1].started[:16])} → {_e(runs[0].started[:16])}"
    out.append(f"<h2>Last {window} of {_e(run.suite)} <small>{span}</small></h2>\n")
    out.append("<h3>Pass rate per check <small>(of the code: environment faults and harness errors left out)</small></h3>\n<div class=\"plots\">\n")
    for check, points in pass_rate_trend(runs, cases).items():
        out.append(_chart(check, points, "pass-rate", run.run_id))
    out.append("</div>\n<h3>Environment faults per host <small>(share of the host's cases)</small></h3>\n<div class=\"plots\">\n")
    categories: dict[str, Counter] = defaultdict(Counter)
    for case in cases:
        if case.outcome is Outcome.ENV_FAULT:
            categories[case.host][case.category or "unknown"] += 1
    for host, points in env_fault_trend(runs, cases).items():
        seen = " · ".join(f"{_e(category)} ×{n}" for category, n in categories[host].most_common())
        out.append(_chart(host, points, "env-fault", run.run_id, seen or "no env faults"))
    out.append("</div>\n</section>\n")
    return "".join(out)


_W, _H = 300, 118
_LEFT, _RIGHT, _TOP, _BOTTOM = 36, 46, 10, 22


def _chart(title: str, points: Sequence[TrendPoint], kind: str, current: str, note: str = "") -> str:
    """A small line plot of ``points`` (0..100 %), a gap marker where a run said nothing; the report's
    own run is ringed. Each point carries its run and meaning as an SVG <title> (hover text)."""
    width, height = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM
    n = len(points)

    def x(i: int) -> float:
        return _LEFT + (i * width / (n - 1) if n > 1 else width / 2)

    def y(v: float) -> float:
        return _TOP + (1 - v) * height

    svg = [
        f"<figure class=\"trend {kind}\"><figcaption title=\"{_e(title)}\">{_e(title)}</figcaption>",
        f"<svg class=\"trend-plot {kind}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{_W}\" height=\"{_H}\" "
        f"viewBox=\"0 0 {_W} {_H}\" role=\"img\" aria-label=\"{_e(kind)} trend of {_e(title)}\">",
    ]
    for level in (0.0, 0.5, 1.0):
        svg.append(
            f"<line class=\"grid\" x1=\"{_LEFT}\" x2=\"{_W - _RIGHT}\" y1=\"{y(level):.1f}\" y2=\"{y(level):.1f}\"/>"
            f"<text class=\"axis\" x=\"{_LEFT - 5}\" y=\"{y(level) + 4:.1f}\" text-anchor=\"end\">{level:.0%}</text>"
        )
    # One line through every run that said something: a run without a verdict (a gap marker on
    # the axis) is no data, not a zero, so the line bridges it.
    valued = [f"{x(i):.1f},{y(p.value):.1f}" for i, p in enumerate(points) if p.value is not None]
    if len(valued) > 1:
        svg.append(f"<polyline class=\"line\" points=\"{' '.join(valued)}\"/>")
    for i, point in enumerate(points):
        tip = f"run {_e(point.run_id)} ({_e(point.started)}): {_e(point.label)}"
        if point.value is None:
            svg.append(f"<circle class=\"gap\" cx=\"{x(i):.1f}\" cy=\"{y(0):.1f}\" r=\"2\"><title>{tip}</title></circle>")
            continue
        bad = point.value < 1 if kind == "pass-rate" else point.value > 0
        ring = " current" if point.run_id == current else ""
        svg.append(
            f"<circle class=\"point{' bad' if bad else ''}{ring}\" cx=\"{x(i):.1f}\" cy=\"{y(point.value):.1f}\" "
            f"r=\"{4.5 if ring else 3}\"><title>{tip}</title></circle>"
        )
    last = next((p for p in reversed(points) if p.value is not None), None)
    if last is not None:
        svg.append(
            f"<text class=\"last\" x=\"{_W - _RIGHT + 6}\" y=\"{y(last.value) + 4:.1f}\">{last.value:.0%}</text>"
        )
    if n:
        svg.append(
            f"<text class=\"axis\" x=\"{_LEFT}\" y=\"{_H - 6}\">{_e(points[0].started[:10])}</text>"
            f"<text class=\"axis\" x=\"{_W - _RIGHT}\" y=\"{_H - 6}\" text-anchor=\"end\">{_e(points[-1].started[:10])}</text>"
        )
    if points and last is None:
        svg.append(
            f"<text class=\"axis none\" x=\"{_LEFT + width / 2:.1f}\" y=\"{y(0.75) + 4:.1f}\" "
            "text-anchor=\"middle\">no verdict on the code in these runs</text>"
        )
    svg.append("</svg>")
    if note:  # already escaped
        svg.append(f"<p class=\"note\">{note}</p>")
    svg.append("</figure>\n")
    return "".join(svg)


def _details(
    hosts: Sequence[str],
    checks: Sequence[str],
    grid: Mapping[tuple[str, str], Sequence[CaseRecord]],
    anchors: Mapping[tuple[str, str], str],
    stand_ins: frozenset[str],
    log_base: str,
) -> str:
    out = ["<section id=\"details\">\n<h2>Evidence per cell</h2>\n"]
    rank = {outcome: i for i, outcome in enumerate(PRECEDENCE)}
    for host in hosts:
        for check in checks:
            cell_cases = grid.get((host, check))
            if not cell_cases:
                continue
            worst = worst_outcome(case.outcome for case in cell_cases)
            word = cell_word([(case.outcome, case.category) for case in cell_cases])
            where = _e(host) + (" <span class=\"badge stand-in\">stand-in</span>" if host in stand_ins else "")
            out.append(
                f"<article id=\"{anchors[host, check]}\" class=\"detail o-{worst.value}-edge\">"
                f"<h3><span class=\"swatch o-{worst.value}\">{_e(word)}</span> {_e(check)} on {where} "
                f"<a class=\"up\" href=\"#matrix\">↑ matrix</a></h3>\n"
            )
            # Seven known-bug cases with one reason: the reason once, not seven times.
            messages = {case.message for case in cell_cases}
            shared = messages.pop() if len(messages) == 1 and len(cell_cases) > 1 else ""
            if shared:
                out.append(f"<p class=\"message shared\">{_e(shared, MAX_MESSAGE)}</p>\n")
            out.append("<ol class=\"cases\">\n")
            ranked = sorted(cell_cases, key=lambda c: (rank.get(c.outcome, len(rank)), c.case))
            for case in ranked[:MAX_CASES_PER_CELL]:
                out.append(_case(case, log_base, show_message=not shared))
            if len(ranked) > MAX_CASES_PER_CELL:
                rest = Counter(case.outcome.value for case in ranked[MAX_CASES_PER_CELL:])
                summary = ", ".join(f"{n} {outcome}" for outcome, n in sorted(rest.items()))
                out.append(f"<li class=\"more\">and {len(ranked) - MAX_CASES_PER_CELL} more cases ({_e(summary)})</li>\n")
            out.append("</ol>\n</article>\n")
    out.append("</section>\n")
    return "".join(out)


def _case(case: CaseRecord, log_base: str, show_message: bool = True) -> str:
    label = case.outcome.value + (f"/{case.category}" if case.category else "")
    facts = [f"{case.duration:.1f} s"]
    if case.attempt > 1:
        facts.append(f"{case.attempt} attempts")
    if case.device:
        facts.append(f"device {_e(case.device)}")
    out = [
        f"<li class=\"case\"><span class=\"swatch o-{case.outcome.value}\">{_e(label)}</span> "
        f"<span class=\"case-name\">{_e(case.case)}</span> <small>{' · '.join(facts)}</small>"
    ]
    if case.log:
        # The recorder keeps a check's log folder (every attempt's output); a file path is one log.
        name = case.log.rstrip("/").rsplit("/", 1)[-1]
        label = "log" if "." in name else "logs/"
        out.append(f" <a class=\"log\" href=\"{_e(_log_href(log_base, case.log), MAX_PATH * 4)}\">{label}</a>")
    if case.message and show_message:
        out.append(f"<p class=\"message\">{_e(case.message, MAX_MESSAGE)}</p>")
    if case.evidence:
        lines = [_e(line, MAX_EVIDENCE_LINE) for line in case.evidence[:MAX_EVIDENCE]]
        if len(case.evidence) > MAX_EVIDENCE:
            lines.append(f"… {len(case.evidence) - MAX_EVIDENCE} more evidence lines in the log")
        out.append(f"<pre class=\"evidence\">{chr(10).join(lines)}</pre>")
    out.append("</li>\n")
    return "".join(out)


def _log_href(base: str, log: str) -> str:
    """A link that can only be a local file: percent-encoded (so no ``javascript:`` or other
    scheme survives), relative ones prefixed with ``./``, absolute ones as ``file://``."""
    path = _clean(base.rstrip("/") + "/" + log if base else log, MAX_PATH)
    if path.startswith("/"):
        return "file://" + quote(path, safe="/")
    return "./" + quote(path, safe="/")


# ---------------------------------------------------------------------------------------------
# Helpers


def _clean(text: str, limit: int) -> str:
    """``text`` capped at ``limit`` characters, as valid UTF-8 without control characters."""
    if len(text) > limit:
        text = f"{text[:limit]}… [{len(text) - limit} more characters]"
    text = text.encode("utf-8", "replace").decode("utf-8")  # a lone surrogate becomes "?"
    return _CONTROL.sub("\ufffd", text)


def _e(text: str, limit: int = MAX_NAME) -> str:
    """Escaped for HTML text and attribute values alike."""
    return html.escape(_clean(str(text), limit), quote=True)


def _short_digest(digest: str) -> str:
    algorithm, _, value = digest.partition(":")
    return f"{algorithm}:{value[:12]}" if value else digest[:19]


def _natural(name: str) -> list:
    """sim-wh-2 before sim-wh-10."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", name)]


_CSS = """
:root{--pass:#d3eed6;--pass-ink:#1b5e20;--fail:#c62828;--env:#f2a900;--env-dark:#d99400;--env-ink:#3b2600;
--error:#263238;--xfail:#d4dcf0;--xfail-ink:#1a237e;--xpass:#8e24aa;--flaky:#f8bbd0;--flaky-ink:#880e4f;
--skip:#eceff1;--skip-ink:#546e7a;--ink:#1d2330;--muted:#5f6b7a;--line:#dde3ea}
*{box-sizing:border-box}
body{margin:0;padding:24px 32px 40px;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--ink);background:#f7f9fb}
h1{font-size:22px;margin:0 0 4px}h1 .run-id{font-weight:400;color:var(--muted);font-size:16px;margin-left:8px}
h2{font-size:17px;margin:28px 0 10px;padding-bottom:4px;border-bottom:1px solid var(--line)}
h2 small,h3 small{font-weight:400;color:var(--muted)}
h3{font-size:14px;margin:14px 0 8px}
code{font:12px/1.4 ui-monospace,"DejaVu Sans Mono",monospace;background:#eef1f5;padding:1px 4px;border-radius:3px}
.meta{color:var(--muted);margin:0 0 8px}.meta b{color:var(--ink)}
.counts{margin:0}
.chip{display:inline-block;margin:2px 6px 2px 0;padding:2px 8px;border-radius:10px;font-size:12px}
.stand-in-note{margin:10px 0 0;padding:8px 12px;background:#fff8e1;border-left:4px solid #8d6e63;border-radius:4px}
.badge{display:inline-block;font-size:10px;font-weight:600;letter-spacing:.04em;text-transform:uppercase;padding:1px 5px;border-radius:3px;vertical-align:middle}
.badge.stand-in{background:#8d6e63;color:#fff}
table.matrix{border-collapse:separate;border-spacing:4px;background:#fff;border:1px solid var(--line);border-radius:8px;padding:6px}
.matrix th{font-weight:600;text-align:left;padding:6px 10px;vertical-align:bottom}
.scroll{overflow-x:auto;max-width:100%}
.matrix th.check{font-size:12px;overflow-wrap:break-word}
.matrix th.host{white-space:nowrap;vertical-align:middle}.matrix th.host small{color:var(--muted);font-weight:400}
td.cell{padding:0;border-radius:6px;min-width:104px;text-align:center}
td.cell a,td.cell span{display:block;padding:12px 10px;color:inherit;text-decoration:none;font-weight:600;font-size:13px}
td.cell a:hover{outline:2px solid var(--ink);outline-offset:-2px;border-radius:6px}
.o-pass{background:var(--pass);color:var(--pass-ink)}
.o-fail{background:var(--fail);color:#fff}
.o-env_fault{background:var(--env) repeating-linear-gradient(135deg,var(--env) 0 9px,var(--env-dark) 9px 12px);color:var(--env-ink)}
.o-error{background:var(--error);color:#fff}
.o-xfail{background:var(--xfail);color:var(--xfail-ink);box-shadow:inset 0 0 0 2px #7986cb}
.o-xpass{background:var(--xpass);color:#fff}
.o-flaky{background:var(--flaky);color:var(--flaky-ink)}
.o-skip{background:var(--skip);color:var(--skip-ink)}
.o-none{background:#fff;color:#b0bac5}
.legend{list-style:none;padding:0;margin:10px 0 0;display:flex;flex-wrap:wrap;gap:6px 18px;color:var(--muted);font-size:12px}
.swatch{display:inline-block;padding:1px 7px;border-radius:4px;font-weight:600;font-size:12px}
.plots{display:flex;flex-wrap:wrap;gap:12px}
figure.trend{margin:0;background:#fff;border:1px solid var(--line);border-radius:8px;padding:8px 8px 2px}
figure.trend figcaption{font-size:12px;font-weight:600;max-width:290px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
svg .grid{stroke:#e3e8ee;stroke-width:1}svg .axis{fill:#8a96a3;font-size:10px}
svg.pass-rate .line{fill:none;stroke:#2e7d32;stroke-width:2}
svg.env-fault .line{fill:none;stroke:#c98600;stroke-width:2}
svg .point{fill:#2e7d32}svg .point.bad{fill:var(--fail)}
svg.env-fault .point{fill:#9aa5b1}svg.env-fault .point.bad{fill:#c98600}
svg .point.current{stroke:var(--ink);stroke-width:1.5}
svg .gap{fill:#cfd6de}svg .none{font-size:11px;fill:#8a96a3}
figure.trend .note{margin:0 0 4px;font-size:11px;color:var(--muted);max-width:290px}svg .last{font-size:12px;font-weight:600;fill:var(--ink)}
:where(article.detail){background:#fff;border:1px solid var(--line);border-left-width:6px;border-radius:6px;padding:2px 14px 8px;margin:0 0 10px}
article.detail:target{box-shadow:0 0 0 3px #2962ff}
.o-pass-edge{border-left-color:#2e7d32}.o-fail-edge{border-left-color:var(--fail)}.o-env_fault-edge{border-left-color:var(--env)}
.o-error-edge{border-left-color:var(--error)}.o-xfail-edge{border-left-color:#7986cb}.o-xpass-edge{border-left-color:var(--xpass)}
.o-flaky-edge{border-left-color:#ec407a}.o-skip-edge{border-left-color:#b0bec5}
a.up{font-weight:400;font-size:12px;margin-left:8px}
ol.cases{margin:0;padding-left:22px}ol.cases li{margin:4px 0}
.case-name{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:12px;word-break:break-all}
.case small{color:var(--muted);margin-left:4px}a.log{font-size:12px;margin-left:6px}
.message{margin:4px 0;white-space:pre-wrap;word-break:break-word}
pre.evidence{margin:4px 0;padding:6px 8px;background:#f3f5f8;border-radius:4px;font-size:12px;white-space:pre-wrap;word-break:break-all}
.empty{color:var(--muted)}
ul.glance{list-style:none;margin:0;padding:0;display:grid;gap:4px}
:where(ul.glance li){background:#fff;border:1px solid var(--line);border-left-width:5px;border-radius:4px;padding:3px 10px}
footer{margin-top:28px;color:var(--muted);font-size:12px}
"""
