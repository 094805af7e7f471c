"""How long the simulated lab and the README's main command take, cold and warm.

    python benchmarks/lab_bench.py [--repeat 3] [--cold-repeat N]

Four figures, each the median of ``--repeat`` runs, on this machine's Docker engine:

- ``lab up`` cold: no lab, no images (the local Debian base, the lab's host image and the
  simulated tt-metal image removed first), so it includes debootstrap and the host image build;
- ``lab up`` warm: images cached, the lab down;
- the main command (``harness run jobs/nightly.yaml --lab sim``, what ``./scripts/nightly`` runs
  after its pip install) cold: no lab, no images;
- the main command warm: images cached, the lab down (so it brings the lab up too), and again
  with the lab already up.

Each main-command run is checked: exit 1 (the EraseInverseOps reordering is a real failure), the
hugepage-less host reported as ``env_fault/hugepages``, the known bug as ``known bug``. The lab
used is the user's ``sim`` lab (brought down first and left down at the end). Targets (issue 7):
main command under 600 s cold, under 60 s warm.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HARNESS = [sys.executable, "-m", "harness"]
BASE_IMAGE = "tt-harness/debian:bookworm"


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=check)


def timed(*argv: str) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
    return time.perf_counter() - started, done


def lab_down() -> None:
    sh(*HARNESS, "lab", "down", "-q")


def remove_images() -> None:
    """The lab's images and the base they are built from: what a fresh machine lacks."""
    listed = sh("docker", "images", "--format", "{{.Repository}}:{{.Tag}}").stdout.split()
    doomed = [ref for ref in listed if ref.startswith(("tt-harness/lab-host:", "tt-harness/nightly:")) or ref == BASE_IMAGE]
    if doomed:
        sh("docker", "rmi", "-f", *doomed)
    sh("docker", "image", "prune", "-f")


def lab_up() -> float:
    seconds, done = timed(*HARNESS, "lab", "up", "-q")
    if done.returncode != 0:
        raise SystemExit(f"lab up failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return seconds


def main_command(out: Path) -> float:
    seconds, done = timed(*HARNESS, "run", "jobs/nightly.yaml", "--lab", "sim", "--out", str(out), "--quiet")
    summary = json.loads((out / "summary.json").read_text())
    table = done.stdout
    if done.returncode != 1 or "env_fault/hugepages" not in table or "known bug" not in table:
        raise SystemExit(f"the main command did not give the nightly's verdicts (exit {done.returncode}):\n{table}\n{done.stderr}")
    assert summary["counts"]["xfail"] >= 7
    return seconds


def median(values: list[float]) -> str:
    return f"{statistics.median(values):7.1f} s  (runs: {', '.join(f'{v:.1f}' for v in values)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cold-repeat", type=int, default=None, help="runs of the cold figures (default: --repeat; each rebuilds every image)")
    args = parser.parse_args()
    out = Path("/tmp/tt-harness-lab-bench")
    figures: dict[str, list[float]] = {}

    def record(name: str, seconds: float) -> None:
        figures.setdefault(name, []).append(seconds)
        print(f"  {name}: {seconds:.1f} s", flush=True)

    cold_runs = args.repeat if args.cold_repeat is None else args.cold_repeat
    for run in range(args.repeat):
        if run < cold_runs:
            lab_down(); remove_images()
            record("lab up, cold (no images)", lab_up())
            lab_down(); remove_images()
            record("main command, cold (no images, lab down)", main_command(out))
        lab_down()
        record("lab up, warm (images cached)", lab_up())
        lab_down()
        record("main command, warm (images cached, lab down)", main_command(out))
        record("main command, warm (lab up)", main_command(out))
    lab_down()
    print(f"\nmedians (warm: {args.repeat} runs, cold: {cold_runs})")
    for name, values in figures.items():
        print(f"  {name:48s} {median(values)}")


if __name__ == "__main__":
    main()
