"""What the benchmarks share: the `harness` command as installed, and timing one run of a command."""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from pathlib import Path


def harness_command() -> list[str]:
    """The installed `harness` script next to this interpreter, else `python -m harness`."""
    script = Path(sys.executable).parent / "harness"
    return [str(script)] if script.exists() else [sys.executable, "-m", "harness"]


def children_cpu() -> float:
    """CPU seconds of the waited-for child processes so far (their own workers included)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(argv: list[str], **run) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall and CPU seconds of one run of ``argv`` (``run``: subprocess.run's keywords)."""
    cpu = children_cpu()
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, **run)
    return time.perf_counter() - start, children_cpu() - cpu, done
