"""A pytest plugin for developers who run tt-metal's pytest suites directly, without `harness run`.

Installed with tt-harness (a ``pytest11`` entry point) and **inert** unless enabled with
``--tt-harness`` or the ini option ``tt_harness = true``: until then it only adds that option.

Enabled, it judges every failing test report (setup, call or teardown) the way ``harness
classify`` judges a failed case of a JUnit report, with the same classifier
(:func:`harness.core.classifier.classify_case`) and the same signature catalog: the exception
pytest shows and the test's captured stdout, stderr and log. A **fatal** environment signature
(``No chips detected in the cluster``, a hugepages ``TT_FATAL``, a busy card...) turns the
failure into an **error** of type ``environment/<category>``:

- in the terminal: ``E``/``ERROR`` instead of ``F``/``FAILED``, a section with the deciding
  lines under the test's traceback, and a "tt-harness: environment faults" summary;
- in ``--junitxml``: ``<error type="environment/<category>" message="...">`` whose text starts
  with the deciding lines, the suite's ``failures``/``errors`` counts adjusted.

Anything else stays as pytest reported it: an assertion, a crash, or a warning-only signature
(``Insufficient NumHugepages``) next to a real failure is a real failure, and an ``xfail`` is
left alone. The exit code is pytest's own (1: tests failed or errored).

Only the exception's message lines are read from the traceback, never its source lines: a test
whose code merely mentions an error string is not an environment fault when it fails.

How JUnit is reached without pytest's internals: the verdict travels as a user property of the
test item (``tt-harness.environment``, JSON), which pytest's JUnit writer puts on the testcase
(and pytest-xdist carries from workers); after pytest has written the file, this plugin rewrites
it once (atomically), turning each marked testcase's ``failure``/``error`` into the typed error
and dropping the property.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

PROPERTY = "tt-harness.environment"
_SOURCE_LINE = re.compile(r"^(>|    )")  # pytest's source lines in a traceback entry
_MAX_LINES = 8
_PYTEST_E = re.compile(r"^E +")  # pytest's exception-line prefix, not part of the message


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tt-harness", "tt-harness: environment faults are errors, not failures")
    group.addoption(
        "--tt-harness", action="store_true", default=False, dest="tt_harness",
        help="Report a failure with a fatal environment signature (no device, hugepages, busy card, "
             "hung board...) as an error of type environment/<category>, with the deciding lines.",
    )
    parser.addini("tt_harness", type="bool", default=False,
                  help="Enable the tt-harness environment-fault classification (as --tt-harness).")


def pytest_configure(config: pytest.Config) -> None:
    if not (config.getoption("tt_harness", False) or config.getini("tt_harness")):
        return  # inert
    # The classifier and its catalog load only when enabled: a bad catalog is a usage error.
    from harness.core.errors import InputError
    from harness.core.signatures import default_catalog

    try:
        catalog = default_catalog()
    except InputError as exc:
        raise pytest.UsageError(f"--tt-harness: {exc}") from None
    config.pluginmanager.register(_Classifier(config, catalog), "tt-harness-classifier")


def _judged(report) -> dict | None:
    """The verdict this plugin put on ``report`` (for its own phase), if any."""
    for name, value in getattr(report, "user_properties", ()):
        if name == PROPERTY:
            try:
                verdict = json.loads(value)
            except (TypeError, ValueError):
                continue
            if verdict.get("when") == report.when:
                return verdict
    return None


class _Classifier:
    def __init__(self, config: pytest.Config, catalog) -> None:
        self.config = config
        self.catalog = catalog
        self.faults: list[tuple[str, dict]] = []  # (nodeid, verdict) in report order

    # -- judging ----------------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call):
        report = yield
        if report.failed and not hasattr(report, "wasxfail"):
            try:
                verdict = self._judge(report)
            except Exception as exc:  # noqa: BLE001 - a classifier bug must not break the session
                report.sections.append(("tt-harness", f"the classifier failed ({type(exc).__name__}: {exc}); "
                                                      "the failure stands as pytest reported it"))
                verdict = None
            if verdict is not None:
                verdict["when"] = report.when
                entry = (PROPERTY, json.dumps(verdict))
                report.user_properties.append(entry)
                item.user_properties.append(entry)  # for the teardown report JUnit closes the case with
                lines = "\n".join(verdict["lines"]) or verdict["message"]
                report.sections.append((f"tt-harness: environment/{verdict['category']}", lines))
        return report

    def _judge(self, report) -> dict | None:
        from harness.core.classifier import classify_case
        from harness.core.outcomes import Outcome

        text = _failure_text(report)
        verdict = classify_case(text, self.catalog)
        if verdict.outcome is not Outcome.ENV_FAULT:
            return None
        lines = [_PYTEST_E.sub("", e.text.strip()) + (f"  [{e.signature}]" if e.signature else "") for e in verdict.evidence]
        return {"category": str(verdict.category), "message": verdict.message, "lines": lines[:_MAX_LINES]}

    # -- the terminal -----------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report, config):
        if report.failed and _judged(report) is not None:
            return "error", "E", ("ERROR", {"red": True})
        return None

    def pytest_runtest_logreport(self, report) -> None:
        verdict = _judged(report)
        if report.failed and verdict is not None:
            self.faults.append((report.nodeid, verdict))

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.faults:
            return
        terminalreporter.section("tt-harness: environment faults", sep="=", red=True, bold=True)
        for nodeid, verdict in self.faults:
            terminalreporter.line(f"ERROR {nodeid} environment/{verdict['category']}: {verdict['message']}")
            for line in verdict["lines"]:
                terminalreporter.line(f"    {line}")

    # -- JUnit ------------------------------------------------------------------------------------

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session) -> None:
        # trylast: after pytest's JUnit writer has written its file in this same hook.
        path = self._junit_path()
        if path is None or not self.faults:
            return
        try:
            _retype_junit(path)
        except Exception as exc:  # noqa: BLE001 - the session's result stands; say why
            tr = self.config.pluginmanager.get_plugin("terminalreporter")
            if tr is not None:
                tr.write_line(f"tt-harness: could not mark environment faults in {path}: {exc}", red=True)

    def _junit_path(self) -> Path | None:
        xmlpath = getattr(self.config.option, "xmlpath", None)
        if not xmlpath or getattr(self.config, "workerinput", None) is not None:
            return None  # no --junitxml, or an xdist worker (the controller writes it)
        try:
            from _pytest.junitxml import xml_key  # where pytest keeps the path it wrote
            logxml = self.config.stash.get(xml_key, None)
            if logxml is not None and getattr(logxml, "logfile", None):
                return Path(logxml.logfile)
        except ImportError:
            pass
        return Path(os.path.abspath(os.path.expanduser(os.path.expandvars(xmlpath))))


def _failure_text(report) -> str:
    """What the classifier reads, in the order it happened: the test's captured output (every
    phase so far), then the exception as pytest shows it, without its source lines. The order
    matters: a UMD wait (``Waiting for lock ...``) followed by the failure is a wait that ended,
    one the test never got past is the environment's."""
    parts = [f"----- {title} -----\n{content}" for title, content in report.sections
             if title.startswith("Captured ")]
    text = report.longreprtext
    if hasattr(report.longrepr, "reprtraceback") or hasattr(report.longrepr, "chain"):
        text = "\n".join(line for line in text.splitlines() if not _SOURCE_LINE.match(line))
    parts.append(text)
    return "\n".join(parts)


def _retype_junit(path: Path) -> None:
    """Turn each testcase marked with :data:`PROPERTY` into an ``environment/<category>`` error."""
    import xml.etree.ElementTree as ET

    import defusedxml.ElementTree as safe_xml

    from harness.core.atomic import write_bytes

    tree = safe_xml.parse(path)  # pytest's own output, just written; read safely all the same
    changed = False
    for suite in tree.getroot().iter("testsuite"):
        for case in suite.iter("testcase"):
            verdict = None
            for props in case.findall("properties"):
                for prop in props.findall("property"):
                    if prop.get("name") == PROPERTY:
                        verdict = json.loads(prop.get("value", "{}"))
                        props.remove(prop)
                if not len(props):
                    case.remove(props)
            if verdict is None:
                continue
            changed = True
            node = next((n for n in case if n.tag in ("failure", "error")), None)
            details = node.text if node is not None and node.text else ""
            if node is not None and node.tag == "failure":
                _bump(suite, "failures", -1)
                _bump(suite, "errors", +1)
            error = ET.Element("error", {
                "type": f"environment/{verdict['category']}",
                "message": f"environment/{verdict['category']}: {verdict['message']}"[:1024],
            })
            error.text = "deciding lines:\n" + "\n".join(verdict.get("lines", ())) + ("\n\n" + details if details else "")
            if node is not None:
                index = list(case).index(node)
                case.remove(node)
                case.insert(index, error)
            else:
                case.append(error)
    if changed:
        write_bytes(path, ET.tostring(tree.getroot(), encoding="utf-8", xml_declaration=True))


def _bump(element, attribute: str, by: int) -> None:
    try:
        element.set(attribute, str(max(int(element.get(attribute, "0")) + by, 0)))
    except ValueError:
        pass
