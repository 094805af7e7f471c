"""Fuzzing the parsers that read what users and tools hand us: job specs, inventories, gtest/
pytest XML and MLIR. Whatever the bytes, each either parses or fails with its documented input
error (a located problem), within a bounded time; never another exception.

The budget is short in CI (``TT_HARNESS_FUZZ_EXAMPLES``, default 150 per target); run it long by
hand with e.g. ``TT_HARNESS_FUZZ_EXAMPLES=20000 pytest tests/test_fuzz.py``. Inputs are mutations
of real files (the repository's jobs, inventories, gtest XML and tt-mlir inputs), plus fragments
that have broken parsers before (aliases, tags, deep nesting, entities, unterminated strings).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core.errors import InputError
from harness.core.ingest import IngestError, read_junit
from harness.core.inventory import load_inventory
from harness.core.spec import load_job
from harness.mlir.reader import read_module

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = int(os.environ.get("TT_HARNESS_FUZZ_EXAMPLES", "150"))
SECONDS_PER_INPUT = 5.0

SEEDS = {
    "job": [p.read_bytes() for p in sorted((REPO / "jobs").glob("*.yaml"))],
    "inventory": [(REPO / "configs" / "examples" / "lab.yaml").read_bytes(), (REPO / "configs" / "local.yaml").read_bytes()],
    "xml": [p.read_bytes() for p in sorted((REPO / "tests" / "data" / "xml").glob("*.xml"))],
    "mlir": [p.read_bytes()[:20_000] for p in sorted((REPO / "tests" / "data" / "mlir").rglob("*.mlir"))],
}
FRAGMENTS = [
    b"&a", b"*a", b"!!python/object:os.system", b"<<: *a", b"[" * 300, b"{" * 300, b"\x00", b"\xff\xfe",
    b'<!DOCTYPE x [<!ENTITY e "lol">]>', b"&e;", b"<![CDATA[", b'loc("', b"#loc1 = loc(#loc1)", b"loc(#loc99)",
    b"DEBUG|99999999999999999999999|", b'"\\', b"\n", b"\t", b": ", b"- ", b"${X}", b"\r\n", b"\xe2\x80\xae",
]


@st.composite
def mutated(draw, seeds: list[bytes]) -> bytes:
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 8))):
        action = draw(st.sampled_from(("insert", "delete", "replace", "fragment", "truncate")))
        at = draw(st.integers(0, len(data)))
        if action == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif action == "delete":
            del data[at : at + draw(st.integers(1, 64))]
        elif action == "replace":
            data[at : at + 1] = draw(st.binary(min_size=1, max_size=4))
        elif action == "fragment":
            data[at:at] = draw(st.sampled_from(FRAGMENTS))
        else:
            del data[at:]
    return bytes(data)


def fuzz(target: str, parse, errors: tuple[type[BaseException], ...], suffix: str):
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(data=mutated(SEEDS[target]))
    def check(tmp_path_factory, data: bytes) -> None:
        path = tmp_path_factory.mktemp("fuzz") / f"input{suffix}"
        path.write_bytes(data)
        started = time.monotonic()
        try:
            parse(path)
        except errors:
            pass
        assert time.monotonic() - started < SECONDS_PER_INPUT, f"{target}: {len(data)} bytes took too long"

    return check


test_job_specs = fuzz("job", load_job, (InputError,), ".yaml")
test_inventories = fuzz("inventory", load_inventory, (InputError,), ".yaml")
test_junit_reports = fuzz("xml", read_junit, (IngestError,), ".xml")
test_mlir_modules = fuzz("mlir", lambda path: read_module(str(path)), (InputError,), ".mlir")


def test_the_seeds_are_real_files():
    assert all(SEEDS.values()), {k: len(v) for k, v in SEEDS.items()}


@pytest.mark.parametrize("target", sorted(SEEDS))
def test_every_seed_parses_or_fails_cleanly(tmp_path, target):
    parse, errors = {
        "job": (load_job, (InputError,)),
        "inventory": (load_inventory, (InputError,)),
        "xml": (read_junit, (IngestError,)),
        "mlir": (lambda p: read_module(str(p)), (InputError,)),
    }[target]
    for i, seed in enumerate(SEEDS[target]):
        path = tmp_path / f"seed{i}"
        path.write_bytes(seed)
        try:
            parse(path)
        except errors:
            pass
