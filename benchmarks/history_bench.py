"""How fast `harness history` (and `harness report`, where present) answer over a big history.

    python benchmarks/history_bench.py [--runs 10000] [--cases 50] [--repeat 5] [--db PATH]

Builds (or reuses, with ``--db``) a SQLite history of RUNS runs x CASES cases: three hosts, ten
checks of five cases each, one host losing its hugepages halfway, a NIGHTLY-style test that
fails now and then everywhere, and a regression from one ref on; then times, each in a fresh
process exactly as a user runs it (interpreter start, imports, open, query, analysis, print):

- ``harness history`` (the default window), ``--json``, ``--last 200``, ``--check C``,
  ``--host H``, and ``harness report`` when this checkout has it;

and in this process, the same queries without the interpreter's start. Baselines in the same
run: ``SELECT COUNT(*) FROM cases`` on the same file (what any answer over the whole table
costs at least), ``harness --help`` in a fresh process (what any command costs at least), and a
fresh process importing the CLI and SQLAlchemy (what any command that opens a history costs).
Figures are medians of ``--repeat``; the target is under 1 s for every command. On a shared,
loaded machine read the ratios: the absolute times move with the load, the ratios much less.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from benchmarks.timing import timed as timed_command  # noqa: E402

BASE = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
HOSTS = ("wh-n150-01", "wh-n150-02", "wh-n150-03")
CHECKS = ("device-smoke", "layernorm-bw-bugrepro", "layernorm-bw-nightly", "layernorm-bw-small-shapes",
          "eraseinverseops-order", "matmul", "eltwise", "conv2d", "allgather", "softmax")


def build(path: Path, runs: int, cases: int) -> None:
    """The history, written through the store's schema (History.open migrates) and filled with
    one bulk transaction: recording 10,000 runs one by one is not what is measured here."""
    from harness.history.store import History

    History.open(path).close()
    rng = random.Random(7)
    per_check = max(1, cases // len(CHECKS))
    conn = sqlite3.connect(path)
    run_rows, case_rows = [], []
    for i in range(runs):
        run_id = f"r{i:06d}"
        ref = f"ref{i // 500:03d}"  # a new ref every 500 runs
        started = (BASE + datetime.timedelta(hours=2 * i)).isoformat()  # a run every two hours
        run_rows.append((run_id, "nightly", started, started, 0, f"sha256:{ref}", ref))
        host = HOSTS[i % len(HOSTS)]
        for c in range(cases):
            check = CHECKS[c // per_check % len(CHECKS)]
            outcome, category = "pass", None
            if host == HOSTS[2] and i > runs // 2 and rng.random() < 0.3:
                outcome, category = "env_fault", "hugepages"
            elif check == "layernorm-bw-nightly" and rng.random() < 0.05:
                outcome = "fail"
            elif check == "softmax" and i >= runs - 700:
                outcome = "fail"
            case_rows.append((run_id, "nightly", check, f"{check}.case{c}", host, outcome, category, "n150", "0",
                              f"sha256:{ref}", ref, 1.0, 1, "", "[]", ""))
    with conn:
        conn.executemany("INSERT INTO runs VALUES (?,?,?,?,?,?,?)", run_rows)
        conn.executemany(
            "INSERT INTO cases (run_id, job, check_name, case_name, host, outcome, category, board, device, image_digest,"
            " ref, duration, attempt, message, evidence, log) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            case_rows,
        )
    conn.execute("ANALYZE")
    conn.close()


def timed(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def commands_timed(commands: list[list[str]], repeat: int) -> list[tuple[float, float]]:
    """Median wall time and CPU time (user + system of the child) of each command in a fresh
    process. The commands take turns, round by round, so a burst of load from the machine's
    other work hits all of them alike; the CPU time hardly moves with that load at all."""
    times: list[list[tuple[float, float]]] = [[] for _ in commands]
    for _ in range(repeat):
        for i, args in enumerate(commands):
            argv = [sys.executable, *args] if args[0] == "-c" else [sys.executable, "-m", "harness", *args]
            wall, cpu, done = timed_command(argv, cwd=REPO)
            times[i].append((wall, cpu))
            if done.returncode != 0:
                raise SystemExit(f"`harness {' '.join(args)}` failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return [(statistics.median(w for w, _ in t), statistics.median(c for _, c in t)) for t in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--cases", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--db", type=Path, help="reuse (or create) this history file")
    opts = parser.parse_args()

    from harness.core.flakiness import analyze
    from harness.history.store import History

    folder = Path(tempfile.mkdtemp(prefix="tt-harness-history-bench-"))
    db = opts.db or folder / "history.sqlite"
    if not db.exists():
        start = time.perf_counter()
        build(db, opts.runs, opts.cases)
        print(f"built {db}: {opts.runs} runs x {opts.cases} cases in {time.perf_counter() - start:.1f} s "
              f"({db.stat().st_size / 1e6:.0f} MB)")
    with History.open(db) as history:
        runs, cases = history.count()
    print(f"history: {runs} runs, {cases} cases; medians of {opts.repeat}")

    def raw_count():
        with sqlite3.connect(db) as conn:
            return conn.execute("SELECT COUNT(*) FROM cases").fetchone()[0]

    baseline_count, _ = timed(raw_count, opts.repeat)

    def in_process(last, **kw):
        def run():
            with History.open(db) as history:
                found = history.runs(last, **kw)
                return analyze(found, history.cases([r.run_id for r in found], details=False), **kw)
        return run

    rows = []
    for label, fn in (
        ("open + last 20 runs + analysis", in_process(20)),
        ("open + last 200 runs + analysis", in_process(200)),
        ("open + last 20 runs of --check softmax", in_process(20, check="softmax")),
        ("open + last 20 runs of --host " + HOSTS[2], in_process(20, host=HOSTS[2])),
        ("open + all runs + analysis (not a target)", in_process(None)),
    ):
        seconds, report = timed(fn, opts.repeat if "all runs" not in label else 1)
        json.dumps(report.to_json())  # what --json prints must be serializable
        rows.append((f"in process: {label}", seconds, None))

    commands = [
        ["history", "--history", str(db)],
        ["history", "--json", "--history", str(db)],
        ["history", "--last", "200", "--history", str(db)],
        ["history", "--check", "softmax", "--history", str(db)],
        ["history", "--host", HOSTS[2], "--history", str(db)],
    ]
    helped = subprocess.run([sys.executable, "-m", "harness", "report", "--help"], capture_output=True, text=True, cwd=REPO)
    if helped.returncode == 0 and "--history" in helped.stdout and "--html" in helped.stdout:
        commands.append(["report", "--history", str(db), "--html", str(folder / "report.html")])
    else:
        print("harness report: not in this checkout (or without --history/--html): not timed")
    (baseline_help, help_cpu), (baseline_sqlalchemy, imports_cpu), *medians = commands_timed(
        [["--help"], ["-c", "import harness.cli, sqlalchemy"], *commands], opts.repeat
    )
    for args, (seconds, cpu) in zip(commands, medians):
        shown = {str(db): "DB", str(folder / "report.html"): "REPORT.html"}
        rows.append(("harness " + " ".join(shown.get(a, a) for a in args), seconds, cpu))

    print()
    print(f"baseline: SELECT COUNT(*) FROM cases (sqlite3, in process): {baseline_count * 1000:.1f} ms")
    print(f"baseline: harness --help (fresh process): {baseline_help * 1000:.0f} ms, CPU {help_cpu * 1000:.0f} ms")
    print(f"baseline: import harness.cli, sqlalchemy (fresh process, what any history command loads): "
          f"{baseline_sqlalchemy * 1000:.0f} ms, CPU {imports_cpu * 1000:.0f} ms")
    print(f"load average now: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print()
    width = max(len(r[0]) for r in rows)
    print(f"{'what':<{width}}  {'wall':>9}  {'CPU':>9}  {'/ COUNT(*)':>10}  {'/ --help':>8}  target < 1 s (wall)")
    for label, seconds, cpu in rows:
        target = "" if cpu is None else ("ok" if seconds < 1.0 else "MISSED")
        cpu_text = "" if cpu is None else f"{cpu * 1000:.0f} ms"
        print(f"{label:<{width}}  {seconds * 1000:>6.0f} ms  {cpu_text:>9}  {seconds / baseline_count:>10.1f}  "
              f"{seconds / baseline_help:>8.2f}  {target}")


if __name__ == "__main__":
    main()
