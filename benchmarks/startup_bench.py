"""Start-up time of the commands developers call from scripts and hooks.

    python benchmarks/startup_bench.py [--runs 15]

Times, as wall clock of a fresh process each: ``harness classify tiny.log``, ``harness
order-check tiny.mlir``, ``harness validate jobs/nightly.yaml`` and ``harness --help``, against
``python -c pass`` and ``python -c "import typer"`` measured in the same run. The runs are
interleaved (one of each in turn, repeated) so that load from other work on a shared machine
falls on all of them alike; medians are printed, in milliseconds and as ratios to the baselines.
Each command's exit status and output is checked, so a fast crash fails the benchmark.
The target (issue 10): each of classify, order-check and validate under 150 ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # benchmarks/ as a package
from benchmarks.timing import harness_command, timed  # noqa: E402

TARGET_MS = 150.0
_TINY_LOG = "[ RUN      ] Smoke.Device\n[       OK ] Smoke.Device (3 ms)\n[  PASSED  ] 1 test.\n"
_TINY_MLIR = (
    'module {\n  %0 = "ttnn.add"() : () -> () loc(#loc1)\n  %1 = "ttnn.relu"() : () -> () loc(#loc2)\n} loc(#loc)\n'
    '#loc = loc(unknown)\n#loc1 = loc("DEBUG|1|add")\n#loc2 = loc("DEBUG|2|relu")\n'
)


# As installed, Python keeps each module's bytecode (__pycache__) and reads it back; a shell
# with PYTHONDONTWRITEBYTECODE set (some sandboxes) compiles every harness module on every call
# instead, ~30 ms more. The children run as installed; --no-bytecode measures the other case.
_ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def _time(argv: list[str], expect_code: int, expect_text: str) -> tuple[float, float]:
    """Wall and CPU milliseconds of one run of ``argv``."""
    seconds, cpu, done = timed(argv, cwd=ROOT, env=_ENV)
    if done.returncode != expect_code or expect_text not in done.stdout:
        raise SystemExit(
            f"startup_bench: {' '.join(argv)} exited {done.returncode} (expected {expect_code}); "
            f"stdout {done.stdout[-300:]!r} stderr {done.stderr[-300:]!r}"
        )
    return seconds * 1000, cpu * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--no-bytecode", action="store_true", help="run with PYTHONDONTWRITEBYTECODE=1 and no __pycache__")
    args = parser.parse_args()
    if args.no_bytecode:
        _ENV["PYTHONDONTWRITEBYTECODE"] = "1"
        for cache in (ROOT / "harness").rglob("__pycache__"):
            for stale in cache.glob("*.pyc"):
                stale.unlink()
    harness = harness_command()
    with tempfile.TemporaryDirectory(prefix="startup-bench-") as tmp:
        log, mlir = Path(tmp) / "tiny.log", Path(tmp) / "tiny.mlir"
        log.write_text(_TINY_LOG)
        mlir.write_text(_TINY_MLIR)
        cases = {
            "python -c pass": ([sys.executable, "-c", "pass"], 0, ""),
            'python -c "import typer"': ([sys.executable, "-c", "import typer"], 0, ""),
            "harness classify tiny.log": ([*harness, "classify", str(log)], 0, "pass"),
            "harness order-check tiny.mlir": ([*harness, "order-check", str(mlir)], 0, "in order"),
            "harness validate jobs/nightly.yaml": ([*harness, "validate", "jobs/nightly.yaml"], 0, "ok"),
            "harness --help": ([*harness, "--help"], 0, "order-check"),
        }
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
        for name, case in cases.items():  # warm the page cache and .pyc files first
            _time(*case)
        for _ in range(args.runs):
            for name, case in cases.items():
                times[name].append(_time(*case))
    wall = {name: statistics.median(w for w, _ in values) for name, values in times.items()}
    cpu = {name: statistics.median(c for _, c in values) for name, values in times.items()}
    python, typer = wall["python -c pass"], wall['python -c "import typer"']
    print(
        f"start-up{' without bytecode caches' if args.no_bytecode else ''}, median of {args.runs} interleaved runs on {os.cpu_count()} CPUs "
        f"(load average {os.getloadavg()[0]:.2f}: on a busy machine wall time waits for a CPU, CPU time does not)"
    )
    print(f"{'':36} {'wall ms':>8} {'x python':>9} {'x typer':>8} {'CPU ms':>7}  target (wall; CPU)")
    missed = False
    for name in cases:
        verdict = ""
        if name.split()[1] in ("classify", "order-check", "validate"):
            met = wall[name] < TARGET_MS
            missed |= not met
            verdict = f"< {TARGET_MS:.0f} ms: {'met' if met else 'MISSED'}; {'met' if cpu[name] < TARGET_MS else 'MISSED'}"
        print(f"{name:36} {wall[name]:8.1f} {wall[name] / python:9.2f} {wall[name] / typer:8.2f} {cpu[name]:7.1f}  {verdict}")
    return 1 if missed else 0

if __name__ == "__main__":
    sys.exit(main())
