"""`harness order-check`: exit codes, exact JSON, diagnostics, errors without tracebacks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import harness.cli  # noqa: F401  (registers the commands)
from harness.cli.app import app
from harness.core.outcomes import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from tests.paths import TTMLIR_INPUTS

DATA = Path(__file__).parent / "data" / "mlir"
DUMP = DATA / "eio_after_all.mlir.txt"

# The three ops, in a TTNN function, with the permute moved above the reshape.
OUT_OF_ORDER = """module {
  func.func @forward(%arg0: tensor<4xf32> loc("DEBUG|-1|unknown|unknown|-1|xla__device_data")) -> tensor<4xf32> {
    %0 = "ttnn.batch_norm"(%arg0) : (tensor<4xf32>) -> tensor<4xf32> loc(#loc1)
    %1 = "ttnn.permute"(%0) : (tensor<4xf32>) -> tensor<4xf32> loc(#loc2)
    %2 = "ttnn.reshape"(%1) : (tensor<4xf32>) -> tensor<4xf32> loc(#loc3)
    return %2 : tensor<4xf32> loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc = loc(unknown)
#loc1 = loc("DEBUG|15|ResNetModel[resnet]|/m.py:52|forward|54|aten__native_batch_norm")
#loc2 = loc("DEBUG|23|ResNetModel[resnet]|/m.py:52|forward|56|aten__permute")
#loc3 = loc("DEBUG|18|ResNetModel[resnet]|/m.py:52|forward|55|aten__view")
"""


def run(*args: str):
    return CliRunner().invoke(app, ["order-check", *args])


@pytest.fixture
def out_of_order(tmp_path: Path) -> str:
    path = tmp_path / "out.mlir"
    path.write_text(OUT_OF_ORDER)
    return str(path)


def test_in_order_exits_0(tmp_path):
    result = run(str(DATA / "ttnn_resnet_block.mlir"))
    assert result.exit_code == EXIT_OK, result.output
    assert result.stdout == f"{DATA / 'ttnn_resnet_block.mlir'}: in order: 12 indexed ops (23 ops)\n"


def test_json_in_order(tmp_path):
    result = run(str(DATA / "ttnn_resnet_block.mlir"), "--json")
    assert result.exit_code == EXIT_OK
    assert json.loads(result.stdout) == {
        "file": str(DATA / "ttnn_resnet_block.mlir"),
        "ok": True,
        "ops": 23,
        "indexed": 12,
        "violations": [],
        "moved": [],
    }


def test_violations_exit_1_with_exact_json(out_of_order):
    result = run(out_of_order, "--json")
    assert result.exit_code == EXIT_FAILURE
    document = json.loads(result.stdout)
    assert list(document) == ["file", "ok", "ops", "indexed", "violations", "moved"]
    assert document == {
        "file": out_of_order,
        "ok": False,
        "ops": 6,
        "indexed": 3,
        "violations": [
            {"line": 5, "op": "ttnn.reshape", "index": 18, "previous_index": 23, "previous_line": 4, "function": "forward"}
        ],
        "moved": [4],
    }


def test_violations_read_like_compiler_diagnostics(out_of_order):
    result = run(out_of_order)
    assert result.exit_code == EXIT_FAILURE
    assert result.stdout.split("\n") == [
        f'{out_of_order}:5:5: error: op order broken in @forward: "ttnn.reshape" has index 18, '
        "lower than index 23 of the op before it (line 4)",
        f'{out_of_order}:4:5: note: the op before it: "ttnn.permute" (index 23)',
        f"{out_of_order}: 1 violation(s) among 3 indexed ops (6 ops); smallest set of moved ops: 1 op(s) at line(s) 4",
        "",
    ]
    assert result.stderr == ""


def test_fused_policy_option(tmp_path):
    path = DATA / "ttnn_resnet_block.mlir"
    assert run(str(path), "--fused", "max").exit_code == EXIT_FAILURE  # fused[14, 16] -> 16, before an add of 15
    assert run(str(path), "--fused", "skip", "--json").exit_code == EXIT_OK
    assert json.loads(run(str(path), "--fused", "skip", "--json").stdout)["indexed"] == 11
    bad = run(str(path), "--fused", "median")
    assert bad.exit_code == EXIT_USAGE and "median" in bad.output


@pytest.mark.parametrize(
    "name, message",
    [
        ("resnet50_last_module.mlir", "1:1: no op carries an index location: did the pipeline run without --mlir-print-debuginfo?"),
        ("resnet_erase_redundant_shapes.mlir", "1:1: no op carries an index location"),
    ],
)
def test_real_inputs_without_index_exit_2_and_say_why(name, message):
    result = run(str(TTMLIR_INPUTS / name))
    assert result.exit_code == EXIT_USAGE
    assert result.stderr.startswith(f"{TTMLIR_INPUTS / name}:{message}")
    assert result.stdout == ""


def test_unreadable_and_unparseable_input_exit_2_with_a_location_never_a_traceback(tmp_path):
    missing = run(str(tmp_path / "missing.mlir"))
    assert missing.exit_code == EXIT_USAGE
    assert missing.stderr == f"{tmp_path / 'missing.mlir'}:1:1: cannot read file: No such file or directory\n"
    broken = tmp_path / "broken.mlir"
    broken.write_text(OUT_OF_ORDER.replace("} loc(#loc)\n} loc(#loc)", "} loc(#loc)\n}} loc(#loc)"))
    result = run(str(broken))
    assert result.exit_code == EXIT_USAGE
    assert result.stderr == f"{broken}:8:2: `}}` closes nothing\n"
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_passes_names_the_culprit():
    result = run("--passes", str(DUMP))
    assert result.exit_code == EXIT_FAILURE
    lines = DUMP.read_text().split("\n")
    header = next(n for n, line in enumerate(lines, 1) if "After TTIREraseInverseOps" in line)
    assert result.stdout.split("\n")[0] == (
        f"{DUMP}:{header}:1: error: op order first breaks after pass ttir-erase-inverse-ops (TTIREraseInverseOps): "
        "it moved 1 op(s)"
    )
    assert 'note: moved: "ttir.permute" (index 23)' in result.stdout.split("\n")[1]
    document = json.loads(run("--passes", str(DUMP), "--json").stdout)
    assert document["culprit"]["pass"] == "TTIREraseInverseOps" and document["culprit"]["line"] == header
    assert list(document) == ["file", "ok", "dumps", "culprit"]


def test_passes_in_order_exits_0(tmp_path):
    text = DUMP.read_text()
    path = tmp_path / "dump.txt"
    path.write_text(text[: text.index("// -----// IR Dump After TTIREraseInverseOps")])
    result = run("--passes", str(path))
    assert result.exit_code == EXIT_OK
    assert result.stdout == f"{path}: in order after every pass (5 dumps)\n"


@pytest.mark.parametrize("args", [[], ["a.mlir", "--passes", "b.txt"]])
def test_file_xor_passes(args):
    result = run(*args)
    assert result.exit_code == EXIT_USAGE
    assert "give either an MLIR FILE or --passes DUMP" in result.stderr
