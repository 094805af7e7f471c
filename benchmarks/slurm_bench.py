"""Slurm against SSH on the simulated lab: the scheduling overhead per check, and the throughput of
many short checks through Slurm.

    python benchmarks/slurm_bench.py [--hosts 3] [--checks 6] [--rounds 3] [--throughput 200] [--keep]

Brings up its own simulated lab with Slurm (``slbench``: STAND-IN hosts, real Slurm 22.05), then
in the same run, on the same hosts and the same checks (``true`` in the simulated tt-metal image,
one card each, ``fanout: any``):

1. ``--rounds`` runs of ``--checks`` checks through the SSH executor and through ``--slurm``,
   alternated; the median wall time of each, and the overhead per check through Slurm:
   ``(median_slurm - median_ssh) / checks``, and the ratio ``median_slurm / median_ssh``.
2. ``--throughput`` checks in one job through ``--slurm``: checks per minute (and, for scale,
   the same through SSH).

The image is built and delivered before timing (the first run of each kind is a warm-up), so
the figures are scheduling, preflight and container start, not builds. Every timed run must
pass every check, or the benchmark fails: a fast wrong answer is not a figure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.lab.sim import SimLab  # noqa: E402
from tests.jobspec import write_lab_job  # noqa: E402

LAB = "slbench"


def job(folder: Path, name: str, checks: int) -> Path:
    return write_lab_job(folder, "".join(f"- {{name: c{n:03d}, kind: command, command: ['true'], timeout: 2m}}\n" for n in range(checks)),
                         name=name, fanout="any")


def run(lab: SimLab, spec: Path, out: Path, slurm: bool, expect: int) -> float:
    argv = [sys.executable, "-m", "harness", "run", str(spec), "--inventory", str(lab.inventory_path), "--out", str(out), "--quiet"]
    if slurm:
        argv += ["--slurm", LAB]
    started = time.monotonic()
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=3600)
    elapsed = time.monotonic() - started
    summary = json.loads((out / "summary.json").read_text())
    if done.returncode != 0 or summary["counts"]["pass"] != expect:
        raise SystemExit(f"slurm_bench: a timed run did not pass ({'slurm' if slurm else 'ssh'}): exit {done.returncode}\n{done.stdout[-3000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--checks", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--throughput", type=int, default=200)
    parser.add_argument("--keep", action="store_true", help="leave the lab up afterwards")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="slurm-bench-"))
    lab = SimLab(LAB, directory=work / "lab", on_progress=lambda line: print(line, file=sys.stderr))
    lab.down()
    lab.up(args.hosts, slurm=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        nodes = (lab.status().slurm or {}).get("nodes", [])
        if len(nodes) == args.hosts and all(n["state"] == "idle" for n in nodes):
            break
        time.sleep(1)
    try:
        small = job(work, "bench-small", args.checks)
        for slurm in (False, True):  # warm-up: build, deliver
            run(lab, small, work / f"warm-{slurm}", slurm, args.checks)
        ssh, via = [], []
        for r in range(args.rounds):
            ssh.append(run(lab, small, work / f"ssh-{r}", False, args.checks))
            via.append(run(lab, small, work / f"slurm-{r}", True, args.checks))
        m_ssh, m_slurm = statistics.median(ssh), statistics.median(via)
        big = job(work, "bench-many", args.throughput)
        t_slurm = run(lab, big, work / "many-slurm", True, args.throughput)
        t_ssh = run(lab, big, work / "many-ssh", False, args.throughput)
        figures = {
            "hosts": args.hosts,
            "checks_per_run": args.checks,
            "rounds": args.rounds,
            "ssh_run_s": [round(x, 2) for x in ssh],
            "slurm_run_s": [round(x, 2) for x in via],
            "median_ssh_s": round(m_ssh, 2),
            "median_slurm_s": round(m_slurm, 2),
            "slurm_over_ssh_ratio": round(m_slurm / m_ssh, 2),
            "slurm_overhead_per_check_s": round((m_slurm - m_ssh) / args.checks, 2),
            "throughput_checks": args.throughput,
            "throughput_slurm_s": round(t_slurm, 1),
            "throughput_slurm_checks_per_min": round(args.throughput / t_slurm * 60, 1),
            "throughput_ssh_s": round(t_ssh, 1),
            "throughput_ssh_checks_per_min": round(args.throughput / t_ssh * 60, 1),
            "throughput_slurm_over_ssh_ratio": round(t_slurm / t_ssh, 2),
        }
        print(json.dumps(figures, indent=2))
    finally:
        if not args.keep:
            lab.down()


if __name__ == "__main__":
    main()
