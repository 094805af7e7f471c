"""How long the HTML report takes, beside a baseline measured in the same run.

    python benchmarks/report_bench.py [--cases 50] [--last 20] [--repeat 7] [--history DB]

The renderer: a nightly-shaped run of ``--cases`` cases per run over 3 hosts and a trend window of
``--last`` runs (what `harness report` renders whatever the history's size: the store is asked only
for the window). Baseline: ``json.dumps`` of the same records (the cheapest full pass over them
that writes text). With ``--history DB`` (e.g. the 10,000 runs x 50 cases one that
`benchmarks/history_bench.py` builds) it also times the whole command, `harness report --html`, in
a fresh process, beside a fresh process that only imports the CLI (Python's start-up). Medians.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.core.outcomes import Outcome  # noqa: E402
from harness.core.records import CaseRecord, RunInfo  # noqa: E402
from harness.core.report_html import render_report  # noqa: E402

HOSTS = ("wh-01", "wh-02", "wh-03")
OUTCOMES = (Outcome.PASS,) * 12 + (Outcome.FAIL, Outcome.ENV_FAULT, Outcome.XFAIL, Outcome.FLAKY)


def history(runs: int, cases: int) -> tuple[list[RunInfo], list[CaseRecord]]:
    infos, records = [], []
    for r in range(runs):
        run = RunInfo(f"run-{r:05d}", "nightly", f"2026-{1 + r // 28 % 12:02d}-{1 + r % 28:02d}T02:00:00Z", exit_code=1)
        infos.append(run)
        for c in range(cases):
            outcome = OUTCOMES[(r * 7 + c * 3) % len(OUTCOMES)]
            records.append(CaseRecord(
                run.run_id, "nightly", f"check-{c % 10}", f"Suite.Case_{c}", HOSTS[c % len(HOSTS)], outcome,
                category="hugepages" if outcome is Outcome.ENV_FAULT else None, board="n150", device="0",
                duration=1.5, message="max_diff=0.91 > atol 0.5" if outcome is Outcome.FAIL else "",
                evidence=("31: dx FAILED: max_diff=0.9102 [gtest-failure]",) if outcome is not Outcome.PASS else (),
                log=f"{run.run_id}/{HOSTS[c % len(HOSTS)]}/check-{c % 10}/attempt-1.log",
            ))
    return infos[::-1], records  # newest first, as the store returns them


def timed(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=50)
    parser.add_argument("--last", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--history", help="a recorded history to time `harness report --html` on")
    args = parser.parse_args()

    runs, cases = history(args.last, args.cases)
    run = runs[0]
    mine = [c for c in cases if c.run_id == run.run_id]
    render = timed(lambda: render_report(run, mine, runs, cases), args.repeat)
    baseline = timed(lambda: json.dumps([dataclasses.asdict(c) for c in cases]), args.repeat)
    size = len(render_report(run, mine, runs, cases).encode())
    print(f"render: {len(mine)} cases, trends over {len(runs)} runs ({len(cases)} records): "
          f"{render * 1000:.1f} ms median of {args.repeat}, page {size / 1024:.0f} KiB")
    print(f"baseline json.dumps of the same records: {baseline * 1000:.1f} ms; ratio {render / baseline:.2f}")

    if args.history:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "report.html"
            command = [sys.executable, "-m", "harness", "report", "--last", str(args.last), "--html", str(out), "--history", args.history]
            start_only = [sys.executable, "-c", "import harness.cli"]

            def run_command():
                subprocess.run(command, check=True, capture_output=True, cwd=REPO)

            whole = timed(run_command, args.repeat)
            startup = timed(lambda: subprocess.run(start_only, check=True, cwd=REPO), args.repeat)
            print(f"harness report --html over {args.history}: {whole * 1000:.0f} ms median of {args.repeat} "
                  f"(target < 1000 ms); python start-up + import harness.cli alone: {startup * 1000:.0f} ms; "
                  f"ratio {whole / startup:.2f}")


if __name__ == "__main__":
    main()
