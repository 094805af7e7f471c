"""Dispatch overhead and makespan of the harness's fan-out, beside parallel-ssh, on the lab.

    python benchmarks/fanout_bench.py [--hosts 1,2,4] [--per-host 4] [--seconds 3] [--repeat 3]

On a simulated lab named ``bench`` (brought up with the largest host count, down at the end), for
each host count H: H x PER_HOST checks, each a container that sleeps SECONDS on the host's card,
pooled (``fanout: any``) over H hosts with one card each.

- **harness**: ``run_job`` from this repository, timed by a listener: a check's dispatch overhead
  is the time from its start to its end minus SECONDS (lease, work folder, ``docker run``,
  probe, results back, clean-up); the makespan is from the first check's start to the last
  one's end, against ideal packing of the same checks' measured spans over the hosts' cards
  (what a scheduler controls), and against PER_HOST x SECONDS (the sleeps alone).
- **parallel-ssh** (Debian's ``pssh``), in the same run: one SSH session per host running the
  same ``docker run --rm --device /dev/tenstorrent/0 IMAGE sleep SECONDS`` PER_HOST times; its
  overhead per check is (wall time / PER_HOST) - SECONDS.

Both reach the hosts over SSH with the lab's pinned keys. Preflight and image delivery are not
in either figure (the harness's fixed per-run costs are printed apart). Target (issue 8):
harness overhead at most 1.2x parallel-ssh's, makespan within 10% of ideal. Medians of --repeat.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.core.events import CheckFinished, CheckStarted, HostChecked  # noqa: E402
from harness.core.inventory import load_inventory  # noqa: E402
from harness.core.spec import load_job  # noqa: E402
from harness.execution import images  # noqa: E402
from harness.lab.sim import SimLab, host_name  # noqa: E402
from harness.orchestration.jobrun import run_job  # noqa: E402


class Timer:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started: dict[tuple[str, str, int], float] = {}
        self.spans: list[tuple[float, float]] = []
        self.first_event: float | None = None
        self.preflight_done: float | None = None
        self.counter = 0

    def on_event(self, event) -> None:
        now = time.monotonic()
        with self.lock:
            if isinstance(event, HostChecked):
                self.preflight_done = now
            elif isinstance(event, CheckStarted):
                self.started[(event.host, event.check, 0)] = now
            elif isinstance(event, CheckFinished) and event.cases:
                begin = self.started.pop((event.host, event.check, 0))
                self.spans.append((begin, now))


def job_text(checks: int, seconds: float) -> str:
    body = "".join(
        f"  - {{name: c{i:03d}, kind: command, command: [sleep, \"{seconds:g}\"], timeout: 5m}}\n" for i in range(checks)
    )
    return textwrap.dedent(f"""\
        name: fanout
        image: {{project: tt-metal-sim, base: tt-harness/debian:bookworm, path: {REPO / "harness" / "lab" / "standin"}}}
        device: {{arch: wormhole_b0, board: n150}}
        hosts: {{labels: [sim], fanout: any}}
        checks:
        """) + body


def packed(durations: list[float], slots: int) -> float:
    """The makespan of ideal packing (longest first, each onto the least loaded slot)."""
    loads = [0.0] * slots
    for d in sorted(durations, reverse=True):
        loads[loads.index(min(loads))] += d
    return max(loads)


def harness_once(lab: SimLab, hosts: list[str], per_host: int, seconds: float, work: Path) -> tuple[float, float, float, float]:
    spec = work / "fanout.yaml"
    spec.write_text(job_text(per_host * len(hosts), seconds))
    timer = Timer()
    started = time.monotonic()
    report = run_job(load_job(spec), load_inventory(lab.inventory_path), work / "out", host_names=tuple(hosts), listeners=(timer,))
    wall = time.monotonic() - started
    assert report.exit_code == 0, report.summary()["counts"]
    overhead = statistics.median(end - begin - seconds for begin, end in timer.spans)
    makespan = max(end for _, end in timer.spans) - min(begin for begin, _ in timer.spans)
    ideal = packed([end - begin for begin, end in timer.spans], len(hosts))
    return overhead, makespan, ideal, wall - makespan


def pssh_once(lab: SimLab, hosts: list[str], per_host: int, seconds: float, image: str, work: Path) -> float:
    inventory = load_inventory(lab.inventory_path)
    hosts_file = work / "pssh-hosts"
    hosts_file.write_text("".join(f"{h.user}@{h.address}:{h.port}\n" for h in inventory.hosts if h.name in hosts))
    first = inventory.host(hosts[0])
    one = f"docker run --rm --device /dev/tenstorrent/0 -v /dev/hugepages-1G:/dev/hugepages-1G {image} sleep {seconds:g}"
    command = "; ".join([one] * per_host)
    started = time.monotonic()
    done = subprocess.run(
        ["parallel-ssh", "-h", str(hosts_file), "-t", "0", "-p", str(len(hosts)),
         "-x", f"-i {first.identity_file} -o UserKnownHostsFile={first.known_hosts} -o StrictHostKeyChecking=yes -o BatchMode=yes",
         command],
        capture_output=True, text=True,
    )
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"parallel-ssh failed:\n{done.stdout}\n{done.stderr}")
    return wall / per_host - seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", default="1,2,4")
    parser.add_argument("--per-host", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if shutil.which("parallel-ssh") is None:
        raise SystemExit("parallel-ssh is not installed: apt-get install pssh")
    counts = [int(n) for n in args.hosts.split(",")]
    lab = SimLab("bench", on_progress=lambda line: print(f"  {line}", flush=True))
    lab.up(max(counts))
    try:
        with tempfile.TemporaryDirectory(prefix="fanout-bench-") as tmp:
            work = Path(tmp)
            spec = work / "warm.yaml"
            spec.write_text(job_text(1, 0.1))
            image = images.ensure_image(load_job(spec)).tag
            # Warm-up: deliver the image to every host once; neither side is timed for it.
            harness_once(lab, [host_name("bench", n) for n in range(1, max(counts) + 1)], 1, 0.1, work)
            print(f"\n{'hosts':>5} {'harness overhead/check':>23} {'pssh overhead/check':>20} {'ratio':>6} "
                  f"{'makespan':>9} {'packed':>7} {'vs packed':>9} {'vs sleeps only':>14} {'fixed (preflight)':>18}")
            for count in counts:
                hosts = [host_name("bench", n) for n in range(1, count + 1)]
                h_over, spans, ideals, fixed, p_over = [], [], [], [], []
                for _ in range(args.repeat):
                    o, m, i, f = harness_once(lab, hosts, args.per_host, args.seconds, work)
                    h_over.append(o); spans.append(m); ideals.append(i); fixed.append(f)
                    p_over.append(pssh_once(lab, hosts, args.per_host, args.seconds, image, work))
                ho, po, ms = statistics.median(h_over), statistics.median(p_over), statistics.median(spans)
                ideal, sleeps = statistics.median(ideals), args.per_host * args.seconds
                print(f"{count:>5} {ho:>21.2f} s {po:>18.2f} s {ho / po if po > 0 else float('inf'):>6.2f} "
                      f"{ms:>7.1f} s {ideal:>5.1f} s {100 * (ms / ideal - 1):>+8.1f}% {100 * (ms / sleeps - 1):>+13.1f}% "
                      f"{statistics.median(fixed):>16.1f} s", flush=True)
    finally:
        lab.down()


if __name__ == "__main__":
    main()
