"""Atomic writes keep the mode a reader expects: the old file's, or what open() would give."""

from __future__ import annotations

import os
import stat

from harness.core.atomic import write_text


def test_a_new_file_gets_the_umask_mode_and_a_replaced_file_keeps_its_mode(tmp_path):
    old = os.umask(0o027)
    try:
        report = tmp_path / "report.html"
        write_text(report, "one")
        assert stat.S_IMODE(report.stat().st_mode) == 0o640
        report.chmod(0o604)
        write_text(report, "two")
        assert report.read_text() == "two" and stat.S_IMODE(report.stat().st_mode) == 0o604
    finally:
        os.umask(old)
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]  # no temp file left behind
