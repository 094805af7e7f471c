"""Throughput and memory of the MLIR op-order check on a TTNN-like module, against grep.

    python benchmarks/order_check_bench.py [--ops 130000] [--runs 3] [--keep]

The headline (issue 10: "order-check within 10x grep -c 'loc('"): ``harness order-check FILE``
end to end, start-up included, against ``grep -c 'loc('`` over the same file, run in turn in the
same loop; medians of wall and CPU time and their ratios. The default 130,000 ops make a ~95 MB
module; ``--ops 1000000`` one of ~750 MB (memory stays flat: see the peak RSS line).

The module is generated (streamed to a temp file) the way tt-mlir prints a TTNN module with
``--mlir-print-debuginfo``: layout attribute aliases on top, nested device/builtin modules,
const-eval functions and a large ``forward``, every op located by ``loc(#locN)``, and the
location aliases defined after the module (``DEBUG|index|...`` names over file locations,
``_tm0`` suffix chains, some fused locations and some ops with string attributes that take the
reader's slow path). Each run reads and checks the file in a fresh child process, which reports
its own wall time and peak RSS (``VmHWM``); the median of the runs is printed.
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

# VmHWM is the peak RSS of this process image; ru_maxrss would also count the parent's pages
# when the child was started by vfork, as subprocess does.
_CHILD = r"""
import json, resource, sys, time
start = time.perf_counter()
if sys.argv[1] != "-":
    from harness.mlir.order import check_order
    from harness.mlir.reader import read_module
    report = check_order(read_module(sys.argv[1]))
    result = {"ops": report.ops, "indexed": report.indexed, "violations": len(report.violations)}
else:
    import harness.mlir.order  # the interpreter and imports alone: the RSS baseline
    result = {}
result["seconds"] = time.perf_counter() - start
try:
    with open("/proc/self/status") as status:
        result["maxrss_kib"] = next(int(l.split()[1]) for l in status if l.startswith("VmHWM:"))
except (OSError, StopIteration):
    result["maxrss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps(result))
"""

_LAYOUTS = [
    "#ttnn_layout{n} = #ttnn.ttnn_layout<(d0, d1, d2, d3) -> (d0 * {a} + d1 * {b} + d2, d3), <1x1>, "
    "memref<{m}x{k}x!ttcore.tile<32x32, bf16>, #dram>, <interleaved>>"
]
_ATEN = ["aten__convolution", "aten__native_batch_norm", "aten__relu", "aten__add", "aten__view", "aten__permute"]
_TTNN = ["ttnn.conv2d", "ttnn.batch_norm", "ttnn.relu", "ttnn.add", "ttnn.reshape", "ttnn.permute"]
_MODULES = (
    "ResNetModel[resnet]|ResNetEncoder[resnet.encoder]|ResNetStage[resnet.encoder.stages.{s}]|"
    "ResNetBottleNeckLayer[resnet.encoder.stages.{s}.layers.{l}]|"
    "BatchNorm2d[getattr(resnet.encoder.stages[{s}].layers[{l}].layer, '1').normalization]"
)
_FILE = "/usr/local/lib/python3.11/dist-packages/transformers/models/resnet/modeling_resnet.py"


class _Writer:
    """Buffers lines and writes them in large blocks (the file never sits in memory)."""

    def __init__(self, handle):
        self.handle = handle
        self.lines: list[str] = []

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        if len(self.lines) >= 20000:
            self.flush()

    def flush(self) -> None:
        self.handle.write("\n".join(self.lines) + "\n")
        self.lines = []


def generate(path: str, ops: int, moved: int = 0, seed: int = 0) -> int:
    """Write a TTNN-like module of about ``ops`` ops to ``path``, ``moved`` of them out of
    order (an op whose index jumps ahead, as EraseInverseOps leaves them); returns the op count."""
    rng = random.Random(seed)
    written = 0
    next_loc = 1
    # Alias definitions are printed after the module: park them in a side file meanwhile.
    with open(path, "w", encoding="utf-8") as handle, tempfile.TemporaryFile("w+", encoding="utf-8") as side:
        out = _Writer(handle)
        deferred = _Writer(side)
        out("#dram = #ttnn.buffer_type<dram>")
        for n in range(24):
            out(_LAYOUTS[0].format(n=n, a=32 * (n + 1), b=32, m=8 * (n + 1), k=n + 2))
        out('#loc = loc(unknown)')
        out(f'#loc1 = loc("{_FILE}":52:0)')  # non-deferred: used by an argument
        out("module @jit_resnet attributes {mhlo.num_partitions = 1 : i32} {")
        out("  ttcore.device_module {")
        out("    builtin.module attributes {ttcore.system_desc = #system_desc} {")
        functions = [("main_const_eval_%d" % i, 100) for i in range(100)]
        functions.append(("forward", max(ops - 100 * 100, 1000)))
        file_locs = []
        for _ in range(64):
            file_locs.append(next_loc + 1)
            deferred(f'#loc{next_loc + 1} = loc("{_FILE}":{rng.randrange(40, 400)}:0)')
            next_loc += 1
        for function, count in functions:
            const_eval = function != "forward"
            attrs = " attributes {const_eval}" if const_eval else ""
            out(
                f"      func.func @{function}(%arg0: tensor<8x64x56x56xbf16, #ttnn_layout1> "
                f'{{ttcore.argument_type = #ttcore.argument_type<parameter>, ttir.name = "w"}} loc(#loc1), '
                f"%arg1: tensor<8x64x56x56xbf16, #ttnn_layout2> loc(#loc1)) -> tensor<8x64x56x56xbf16, #ttnn_layout2>{attrs} {{"
            )
            out(
                '        %0 = "ttnn.get_device"() <{mesh_offset = #ttnn<mesh_offset 0x0>, mesh_shape = #ttnn<mesh_shape 1x1>}> '
                ": () -> !ttnn.device loc(#loc)"
            )
            index = rng.randrange(0, 50)
            jump_every = count // (moved + 1) if function == "forward" and moved else 0
            for value in range(1, count):
                index += rng.choice((0, 0, 1, 1, 1, 2))
                jumped = jump_every and value % jump_every == 0 and value // jump_every <= moved
                kind = rng.randrange(len(_TTNN))
                layout = rng.randrange(24)
                name = (
                    f"DEBUG|{index + 1000 if jumped else index}|" + _MODULES.format(s=index % 4, l=index % 3)
                    + f"|{_FILE}:52|forward|{40 + index % 300}|{_ATEN[kind]}"
                )
                loc = next_loc = next_loc + 1
                shape = f"tensor<8x{64 * (1 + layout % 4)}x56x56xbf16, #ttnn_layout{layout}>"
                roll = rng.random()
                if roll < 0.1:  # a suffix chain, as appendLocationSuffix leaves it
                    deferred(f'#loc{loc} = loc("{name}_input_tm0"(#loc{loc + 1}))')
                    deferred(f'#loc{loc + 1} = loc("{name}"(#loc{rng.choice(file_locs)}))')
                    next_loc += 1
                elif roll < 0.12:  # a fused location: the slow path of the alias reader
                    deferred(f'#loc{loc} = loc(fused[#loc{loc + 1}, #loc{rng.choice(file_locs)}])')
                    deferred(f'#loc{loc + 1} = loc("{name}"(#loc{rng.choice(file_locs)}))')
                    next_loc += 1
                else:
                    deferred(f'#loc{loc} = loc("{name}"(#loc{rng.choice(file_locs)}))')
                if roll > 0.99:  # a string attribute: the slow path of the op reader
                    out(
                        f'        %{value} = "{_TTNN[kind]}"(%{value - 1}) <{{note = "x(y"}}> : ({shape}) -> {shape} loc(#loc{loc})'
                    )
                else:
                    out(
                        f'        %{value} = "{_TTNN[kind]}"(%{value - 1}, %arg1) <{{dtype = #ttcore.supportedDataTypes<bf16>, '
                        f"memory_config = #ttnn.memory_config<#dram, <interleaved>>}}> : ({shape}, {shape}) -> {shape} loc(#loc{loc})"
                    )
                if value % 3 == 0 and not jumped:
                    out(f'        "ttnn.deallocate"(%{value - 1}) <{{force = false}}> : ({shape}) -> () loc(#loc{loc})')
                    written += 1
                written += 1
            out(f"        return %{count - 1} : tensor<8x64x56x56xbf16, #ttnn_layout2> loc(#loc)")
            out("      } loc(#loc)")
            written += 3
        out("    } loc(#loc)")
        out("  } loc(#loc)")
        out("} loc(#loc)")
        out.flush()
        deferred.flush()
        side.seek(0)
        for block in iter(lambda: side.read(1 << 20), ""):
            handle.write(block)
    return written + 3


def against_grep(path: str, runs: int, moved: int) -> bool:
    """`harness order-check` and `grep -c 'loc('` in turn; prints medians and ratios."""
    harness = harness_command()
    grep, check = [], []
    right = True
    for _ in range(runs):
        wall, cpu, _ = timed(["grep", "-c", "loc(", path])
        grep.append((wall, cpu))
        wall, cpu, done = timed([*harness, "order-check", path])
        check.append((wall, cpu))
        right &= done.returncode == (1 if moved else 0)
    gw, gc = (statistics.median(x[i] for x in grep) for i in (0, 1))
    cw, cc = (statistics.median(x[i] for x in check) for i in (0, 1))
    print(
        f"grep -c 'loc(': {gw:.2f} s wall, {gc:.2f} s CPU; harness order-check: {cw:.2f} s wall, {cc:.2f} s CPU; "
        f"ratio {cw / gw:.1f}x wall, {cc / gc:.1f}x CPU (target: within 10x); exit status {'ok' if right else 'WRONG'}"
    )
    return right


def run_child(path: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, path], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=130_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--moved", type=int, default=0, help="ops to put out of order (default: all in order)")
    parser.add_argument("--keep", action="store_true", help="keep the generated file and print its path")
    args = parser.parse_args()

    fd, path = tempfile.mkstemp(prefix="order_check_bench.", suffix=".mlir")
    os.close(fd)
    try:
        ops = generate(path, args.ops, args.moved)
        size = os.path.getsize(path)
        print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
        right = against_grep(path, args.runs, args.moved)
        baseline = run_child("-")
        runs = [run_child(path) for _ in range(args.runs)]
        seconds = statistics.median(run["seconds"] for run in runs)
        rss = statistics.median(run["maxrss_kib"] for run in runs)
        print(
            f"file: {size / 1e6:.1f} MB, {ops} ops generated, {runs[0]['ops']} read, {runs[0]['indexed']} indexed, "
            f"{runs[0]['violations']} violations"
        )
        print("runs: " + ", ".join(f"{size / 1e6 / run['seconds']:.1f} MB/s" for run in runs))
        print(f"median: {seconds:.2f} s, {size / 1e6 / seconds:.1f} MB/s")
        print(f"peak RSS: {rss / 1024:.1f} MiB (interpreter and imports alone: {baseline['maxrss_kib'] / 1024:.1f} MiB)")
        if args.keep:
            print(f"kept: {path}")
    finally:
        if not args.keep:
            os.unlink(path)
    return 0 if right else 1


if __name__ == "__main__":
    sys.exit(main())
