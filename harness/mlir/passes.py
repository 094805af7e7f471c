"""Which pass first breaks op order, from ``--mlir-print-ir-after-all`` output.

The dump file is streamed: each dump (``// -----// IR Dump After <Pass> (<arg>) //----- //``
up to the next header) is read by its own :class:`ModuleReader`, since every dump prints its
own alias definitions, and checked as soon as it ends. Reading stops at the first dump that is
out of order. ``IR Dump Before`` dumps (``--mlir-print-ir-before-all``) are skipped: what
matters is the IR a pass leaves behind.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

from harness.core.errors import InputError
from harness.mlir.locations import FusedPolicy
from harness.mlir.order import OrderReport, check_order, no_index_message
from harness.mlir.reader import ModuleReader, iter_lines

_HEADER_START = "// -----// IR Dump "
_HEADER = re.compile(r"// -----// IR Dump (Before|After) (.*?) //----- //\s*")
# `TTIREraseInverseOps (ttir-erase-inverse-ops)`, optionally `Failed`, and with nested pass
# managers `('func.func' operation: @forward)`.
_PASS = re.compile(r"(?P<name>.*?)(?: Failed)? \((?P<arg>[^()]*)\)(?: \('[^']*' operation(?:: .*)?\))?")


@dataclass(frozen=True)
class PassDump:
    """The IR one pass left behind, and its order check."""

    name: str  # TTIREraseInverseOps
    arg: str | None  # ttir-erase-inverse-ops (None when the header has no argument)
    line: int  # of the dump header
    report: OrderReport

    @property
    def label(self) -> str:
        return f"{self.arg} ({self.name})" if self.arg else self.name


@dataclass(frozen=True)
class PassesReport:
    path: str
    dumps: int  # "After" dumps checked
    culprit: PassDump | None  # the first dump out of order

    @property
    def ok(self) -> bool:
        return self.culprit is None

    def to_json(self) -> dict:
        culprit = self.culprit
        return {
            "file": self.path,
            "ok": self.ok,
            "dumps": self.dumps,
            "culprit": None
            if culprit is None
            else {
                "pass": culprit.name,
                "arg": culprit.arg,
                "line": culprit.line,
                "violations": [violation.to_json() for violation in culprit.report.violations],
                "moved": [op.line for op in culprit.report.moved],
            },
        }


def find_culprit(path: str, fused: FusedPolicy = FusedPolicy.MIN) -> PassesReport:
    """The first pass after which op order breaks; raises InputError on unreadable input, on
    a file without dump headers, or when no dump carries an index location."""
    lines = iter_lines(path)
    line_no = 0
    header: tuple[re.Match, int] | None = None

    def dump_body() -> Iterator[str]:
        """The lines up to the next header (which is left in ``header``)."""
        nonlocal line_no, header
        for text in lines:
            line_no += 1
            if text.startswith(_HEADER_START):
                match = _HEADER.fullmatch(text)
                if match is not None:
                    header = (match, line_no)
                    return
            yield text

    for _ in dump_body():  # whatever comes before the first dump
        pass
    if header is None:
        raise InputError.at(
            path, 1, 1, "no `// -----// IR Dump After ... //----- //` header: was it printed with --mlir-print-ir-after-all?"
        )
    dumps = 0
    indexed = False
    while header is not None:
        match, header_line = header
        header = None
        body = dump_body()
        if match.group(1) != "After":
            for _ in body:
                pass
            continue
        reader = ModuleReader(path, fused, first_line=header_line + 1)
        reader.feed(body)
        for _ in body:  # the reader stops at the file metadata; the dump goes on to the header
            pass
        report = check_order(reader.finish())
        dumps += 1
        indexed = indexed or report.indexed > 0
        if not report.ok:
            found = _PASS.fullmatch(match.group(2))
            name, arg = (found.group("name"), found.group("arg")) if found else (match.group(2), None)
            return PassesReport(path, dumps, PassDump(name, arg, header_line, report))
    if dumps == 0:
        raise InputError.at(path, 1, 1, "no `IR Dump After` dump: was it printed with --mlir-print-ir-after-all?")
    if not indexed:
        raise InputError.at(path, 1, 1, no_index_message(path))
    return PassesReport(path, dumps, None)
