"""Each run's reports in its own folder, a ``latest`` pointer, and a retention limit.

A run of job J with ``--out OUT`` keeps, as before, the current ``OUT/junit.xml`` and
``OUT/summary.json`` (what CI publishes) and every attempt's logs under ``OUT/<run id>/``; this
module adds what a scheduled job needs to look back and not fill the disk:

- ``OUT/<run id>/.tt-harness-run``, written when the run starts: the marker saying the harness
  made this folder, for which job. Only a folder with this marker (a regular file naming the
  same job and the folder's own run id) is ever deleted;
- ``OUT/<run id>/junit.xml`` and ``summary.json``, that run's own reports, when it ends;
- ``OUT/latest``, a symbolic link to the newest run's folder, replaced atomically;
- :func:`prune` (``--keep N``): delete all but the N newest marked run folders of the job.

Deletion never follows a symbolic link: an entry of ``OUT`` that is a link is skipped, and
``shutil.rmtree`` on Linux removes a link inside a run folder as a link, through file
descriptors, not the folder it points to. A user's file or folder in ``OUT`` is never touched,
nor is another job's run folder in the same ``OUT``.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from harness.core import junit
from harness.core.atomic import write_text
from harness.core.events import RunStarted
from harness.core.secretref import Masker

MARKER = ".tt-harness-run"
LATEST = "latest"
_MAX_MARKER = 4096


def mark_run(run_dir: Path, job: str, run_id: str) -> None:
    """Say that the harness made ``run_dir`` for ``job``'s run ``run_id``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    write_text(run_dir / MARKER, json.dumps({"job": job, "run_id": run_id}) + "\n")


class RunMarker:
    """A run listener that marks the run's folder as the run starts, so even a killed run's
    folder is the harness's to prune later."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = Path(out_dir)

    def on_event(self, event: object) -> None:
        if isinstance(event, RunStarted):
            mark_run(self.out_dir / event.run_id, event.job, event.run_id)


def _marked_for(entry: Path, job: str) -> bool:
    """True when ``entry`` is a real folder (not a link) holding a regular marker file that
    names ``job`` and the folder's own name."""
    try:
        if not stat.S_ISDIR(os.lstat(entry).st_mode):
            return False
        fd = os.open(entry / MARKER, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        raw = json.loads(os.read(fd, _MAX_MARKER).decode("utf-8"))
        return isinstance(raw, dict) and raw.get("job") == job and raw.get("run_id") == entry.name
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    finally:
        os.close(fd)


def runs(out_dir: Path, job: str) -> list[str]:
    """The job's marked run folders in ``out_dir``, oldest first (run ids start with their UTC
    start time, so they sort by it)."""
    try:
        names = os.listdir(out_dir)
    except OSError:
        return []
    return sorted(name for name in names if _marked_for(Path(out_dir) / name, job))


@dataclass(frozen=True)
class Pruned:
    removed: tuple[str, ...]
    problems: tuple[str, ...]  # folders that could not be removed, and why


def prune(out_dir: Path, job: str, keep: int, current: str | None = None) -> Pruned:
    """Delete all but the ``keep`` newest run folders of ``job`` in ``out_dir``; ``current``
    (the run that just ended) is always kept."""
    if keep < 1:
        raise ValueError("keep at least one run")
    names = runs(out_dir, job)
    kept = set(names[-keep:]) | ({current} if current else set())
    removed, problems = [], []
    for name in names:
        if name in kept:
            continue
        entry = Path(out_dir) / name
        if not _marked_for(entry, job):  # changed since it was listed: leave it alone
            continue
        try:
            shutil.rmtree(entry)  # refuses a link; removes links inside as links (fd-based on Linux)
            removed.append(name)
        except OSError as exc:
            problems.append(f"{entry}: {exc.strerror or exc}")
    return Pruned(tuple(removed), tuple(problems))


def archive(out_dir: Path, report, masker: Masker) -> list[str]:
    """Keep the ended run's own JUnit and summary in its folder and point ``OUT/latest`` at
    it. Returns notes about what could not be done (the run's verdict stands regardless)."""
    run_dir = Path(out_dir) / report.run_id
    notes: list[str] = []
    mark_run(run_dir, report.job, report.run_id)
    for name in ("junit.xml", "summary.json"):
        target = run_dir / name
        if target.exists() and not target.is_file():
            notes.append(f"{target} is not a regular file (a host of that name?): not written")
    if not notes:
        junit.write(run_dir / "junit.xml", report.suites, name=f"tt-harness {report.job}", redact=masker.values)
        write_text(run_dir / "summary.json", json.dumps(masker.data(report.summary()), indent=2) + "\n")
    notes.extend(point_latest(Path(out_dir), report.run_id))
    return notes


def point_latest(out_dir: Path, run_id: str) -> list[str]:
    """``OUT/latest`` -> ``run_id``, replaced atomically; a ``latest`` that is not a link
    (the user's) is left alone."""
    latest = out_dir / LATEST
    try:
        if not stat.S_ISLNK(os.lstat(latest).st_mode):
            return [f"{latest} exists and is not a symbolic link: left alone"]
    except FileNotFoundError:
        pass
    tmp = out_dir / f".{LATEST}.{os.getpid()}.tmp"
    try:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        os.symlink(run_id, tmp)
        os.replace(tmp, latest)  # rename replaces the link itself, never what it points to
    except OSError as exc:
        return [f"{latest}: {exc.strerror or exc}"]
    return []

