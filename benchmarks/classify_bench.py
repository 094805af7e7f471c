"""Throughput and peak memory of the log classifier on big, realistic logs, against grep.

    python benchmarks/classify_bench.py [--sizes-mb 500] [--repeat 3] [--engine auto|automaton|python]

The headline (issue 10: "classify within 5x grep"): ``harness classify LOG`` end to end, start-up
included, against ``grep -c -E`` with five catalog strings over the same file, run in turn in the
same loop (so load from other work falls on both alike); medians of wall and of CPU time (the
process and its workers), and their ratios.

For each size it writes a log to a temp dir, streamed (never held in memory): tt-logger lines in
the real format, gtest RUN/OK blocks, an occasional hugepage warning, and near the end one test
failing in SetUp with ``No chips detected in the cluster``. Each classification runs in a fresh
child process, so the peak RSS reported is that process's own (``getrusage``), with the largest
peak of the worker processes the classifier starts for a big file (``RUSAGE_CHILDREN`` keeps the
maximum over children, not their sum: all processes together use at most the parent's plus one
worker's per CPU); the median of ``--repeat`` runs is reported. A baseline child that only
imports the classifier shows the interpreter's share of the memory. The verdict and its evidence
line are checked against what the generator wrote, so a fast wrong answer fails the benchmark.
Throughput is reported per wall-clock second and per CPU-second of the classifying process and
its workers together: on a shared machine the first drops with the load, the second shows what
the classifier itself costs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ as a package
from benchmarks.timing import harness_command, timed  # noqa: E402

_MB = 1_000_000

_TEMPLATES = (
    "info     |             UMD | Opening local chip ids/PCIe ids: {{0}}/[0] and remote chip ids {{}} (cluster.cpp:173)",
    "debug    |           Metal | Allocated L1 buffer at 0x{a:x} size {s} on core (x={x},y={y}) (allocator.cpp:212)",
    "info     |          Device | Program cache hit for LayerNormBackwardDeviceOperation hash {h} (program_cache.hpp:88)",
    "debug    |           Metal | Enqueue program {p} on command queue 0 with {k} kernels (command_queue.cpp:455)",
    "info     |             UMD | Established firmware bundle version: 18.5.0 (topology_discovery.cpp:366)",
    "debug    |          Fabric | Router on chip 0 eth chan {c} ready (fabric_context.cpp:301)",
    "info     |           Metal | DPRINT core (x={x},y={y}): tile {t} row {r}: 0.5 0.25 -0.125 1.0 (dprint_server.cpp:77)",
    "debug    |     Distributed | Mesh device 1x1 op ttnn::prim::ttml_layernorm_bw dispatched in {u} us (mesh_device.cpp:640)",
    "info     |          Device | Read {s} bytes from device 0 DRAM channel {c} in {u} us (device.cpp:1012)",
    "debug    |             UMD | TLB window {k} mapped for core (x={x},y={y}) at 0x{a:x} (tlb_manager.cpp:120)",
)
_WARNINGS = (
    "warning  |             UMD | ---- ttSiliconDevice::init_hugepage: bind_area_to_memory_nodeset() failed "
    "(physical_device_id: 0 ch: 0). Hugepage allocation is not on NumaNode matching TT Device. (silicon_sysmem_manager.cpp:281)",
    "warning  |             UMD | Insufficient NumHugepages: 0 should be at least NumMMIODevices: 1 for device_id: 0x401e "
    "revision: 1. NumHostMemChannels would be 0, bumping to 1. (hugepage.cpp:112)",
)


def _pool(rng: random.Random, size: int = 20_000) -> list[str]:
    lines = []
    for i in range(size):
        stamp = f"2025-11-07 21:{i // 6000 % 60:02d}:{i // 100 % 60:02d}.{i % 1000:03d}"
        body = rng.choice(_TEMPLATES).format(
            a=rng.randrange(1 << 32), s=rng.randrange(1, 1 << 20), x=rng.randrange(8), y=rng.randrange(8),
            h=rng.randrange(1 << 48), p=rng.randrange(10_000), k=rng.randrange(1, 9), c=rng.randrange(16),
            t=rng.randrange(256), r=rng.randrange(32), u=rng.randrange(1, 5000),
        )
        lines.append(f"{stamp} | {body}")
    return lines


def write_log(path: Path, size: int, seed: int = 7) -> int:
    """Write about ``size`` bytes of log; returns the line number of the fatal signature."""
    rng = random.Random(seed)
    pool = _pool(rng)
    written = 0
    line_number = 0
    test = 0
    with open(path, "w", encoding="utf-8") as out:
        while written < size * 0.99:
            test += 1
            body = rng.choices(pool, k=rng.randrange(100, 400))
            if rng.random() < 0.2:
                body.insert(rng.randrange(len(body)), f"2025-11-07 21:59:20.155 | {rng.choice(_WARNINGS)}")
            block = [f"[ RUN      ] LayerNormBackwardOpTest.Case_{test}", *body, f"[       OK ] LayerNormBackwardOpTest.Case_{test} (12 ms)"]
            text = "\n".join(block) + "\n"
            out.write(text)
            written += len(text)
            line_number += len(block)
        fatal_line = line_number + 3
        out.write(
            f"[ RUN      ] LayerNormBackwardOpTest.Case_{test + 1}\n"
            f"{pool[0]}\n"
            "2025-11-07 21:59:20.155 | critical |          Always | TT_FATAL: No chips detected in the cluster (assert.hpp:104)\n"
            "unknown file: Failure\n"
            'C++ exception with description "TT_FATAL @ /work/tt_metal/llrt/tt_cluster.cpp:129: num_chips > 0\n'
            '" thrown in SetUp().\n'
            f"[  FAILED  ] LayerNormBackwardOpTest.Case_{test + 1} (0 ms)\n"
        )
    return fatal_line


_CHILD = """
import json, resource, sys, time
from harness.core.classifier import classify_file, classify_log
mode, path = sys.argv[1], sys.argv[2]
classify_log([])  # load and compile the catalog outside the timed part
def cpu():
    used = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(u.ru_utime + u.ru_stime for u in used)
before = cpu()
start = time.perf_counter()
verdict = None
if mode == "file":
    verdict = classify_file(path)
elif mode == "lines":
    with open(path, encoding="utf-8") as lines:
        verdict = classify_log(lines)
seconds = time.perf_counter() - start
print(json.dumps({
    "seconds": seconds,
    "cpu_seconds": cpu() - before,
    "max_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    "max_child_rss_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
    "outcome": verdict and verdict.outcome.value,
    "category": verdict and verdict.category and verdict.category.value,
    "line": verdict and verdict.evidence and verdict.evidence[0].line,
}))
"""


# Five verbatim catalog strings (metal-no-chips, umd-insufficient-hugepages,
# umd-bind-area-numa, umd-pcie-read-ffffffff, metal-noc-hung), as an ERE.
GREP_PATTERN = (
    r"No chips detected in the cluster|Insufficient NumHugepages|bind_area_to_memory_nodeset\(\) failed|"
    r"Read 0xffffffff from PCIE|NOC0 appears hung"
)


def against_grep(path: Path, fatal_line: int, repeat: int) -> bool:
    """`harness classify` and `grep -c -E` in turn; prints medians and ratios; True if right."""
    grep, classify = [], []
    right = True
    for _ in range(repeat):
        wall, cpu, done = timed(["grep", "-c", "-E", GREP_PATTERN, str(path)])
        grep.append((wall, cpu))
        wall, cpu, done = timed([*harness_command(), "classify", str(path)])
        classify.append((wall, cpu))
        right &= done.returncode == 3 and f"    {fatal_line}: " in done.stdout  # env_fault, the fatal line
    gw, gc = (statistics.median(x[i] for x in grep) for i in (0, 1))
    cw, cc = (statistics.median(x[i] for x in classify) for i in (0, 1))
    size = path.stat().st_size / _MB
    print(
        f"{size:8.0f} MB  grep -c -E (5 strings)  {gw:6.2f} s wall {gc:6.2f} s CPU   "
        f"harness classify  {cw:6.2f} s wall {cc:6.2f} s CPU   "
        f"ratio {cw / gw:5.2f}x wall, {cc / gc:5.2f}x CPU (target: within 5x)  verdict {'ok' if right else 'WRONG'}"
    )
    return right


def _child(mode: str, path: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", _CHILD, mode, str(path)], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes-mb", default="500", help="log sizes in MB, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--lines-api", action="store_true", help="also time classify_log over text lines")
    parser.add_argument("--engine", choices=("auto", "automaton", "python"), default="auto", help="anchor search engine")
    parser.add_argument("--no-details", action="store_true", help="only the comparison with grep")
    args = parser.parse_args()
    os.environ["TT_HARNESS_PREFILTER"] = args.engine  # read by every child
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; engine {args.engine}")
    baseline = _child("none", Path("/dev/null"))["max_rss_kb"]
    print(f"baseline child (interpreter + imports): peak RSS {baseline / 1024:.1f} MiB")
    failed = False
    with tempfile.TemporaryDirectory(prefix="classify-bench-") as tmp:
        for size_mb in (int(s) for s in args.sizes_mb.split(",")):
            path = Path(tmp) / f"log-{size_mb}MB.log"
            fatal_line = write_log(path, size_mb * _MB)
            actual = path.stat().st_size
            failed |= not against_grep(path, fatal_line, args.repeat)
            modes = () if args.no_details else ("file", "lines") if args.lines_api else ("file",)
            for mode in modes:
                runs = [_child(mode, path) for _ in range(args.repeat)]
                rate = statistics.median(actual / _MB / run["seconds"] for run in runs)
                cpu_rate = statistics.median(actual / _MB / run["cpu_seconds"] for run in runs)
                rss = max(run["max_rss_kb"] for run in runs) / 1024
                child_rss = max(run["max_child_rss_kb"] for run in runs) / 1024
                right = all(
                    (r["outcome"], r["category"], r["line"]) == ("env_fault", "device-missing", fatal_line) for r in runs
                )
                failed |= not right
                api = "classify_file" if mode == "file" else "classify_log(lines)"
                print(
                    f"{actual / _MB:8.0f} MB  {api:20} {rate:7.1f} MB/s wall, {cpu_rate:6.1f} MB/s per CPU-second "
                    f"(medians of {args.repeat})  "
                    f"peak RSS {rss:6.1f} MiB, largest worker {child_rss:6.1f} MiB  "
                    f"verdict {'ok' if right else 'WRONG: ' + json.dumps(runs[0])}"
                )
            path.unlink()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
