"""The parallel scan of big files gives exactly the single-process results: the same candidate
lines with the same numbers, and the same verdict, wherever lines fall on chunk and task
boundaries. Chunks are scaled down so a few-MB log has hundreds of boundaries."""

from __future__ import annotations

import io
import os
import random
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest

import harness.core.classifier as classifier
from harness.core.classifier import classify_file, classify_stream
from harness.core.outcomes import EnvCategory, Outcome
from harness.core.signatures import default_catalog

LOGS = Path(__file__).parent / "data" / "logs"
CHUNK = 4096
MAX_LINE = 1024
TASK_CHUNKS = 2
TASK = TASK_CHUNKS * CHUNK
FATAL = b"2025-11-07 21:59:20.155 | critical |          Always | TT_FATAL: No chips detected in the cluster (assert.hpp:104)"
HITS = [s.example.encode() for s in default_catalog()] + [
    b"[ RUN      ] Suite.T1",
    b"[       OK ] Suite.T1 (1 ms)",
    b"[  FAILED  ] Suite.T2 (1 ms)",
    b"t.cpp:12: Failure",
    b"E   AssertionError: caf\xc3\xa9",
    b"Segmentation fault (core dumped) \xff\xfe",
]


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    monkeypatch.setattr(classifier, "_CHUNK", CHUNK)
    monkeypatch.setattr(classifier, "_MAX_LINE", MAX_LINE)
    monkeypatch.setattr(classifier, "_TASK_CHUNKS", TASK_CHUNKS)


def ordinary(rng: random.Random) -> bytes:
    return b"2025-11-07 21:59:20.%03d | debug    |           Metal | Allocated L1 buffer at 0x%x size %d caf\xc3\xa9" % (
        rng.randrange(1000), rng.randrange(1 << 32), rng.randrange(1 << 20),
    )


def boundary_log(seed: int, grid_points: int = 600) -> bytes:
    """A log with something at each chunk boundary, in turn: a candidate line ending right
    before it, starting right at it, straddling it, an overlong line with a hit across it that
    started more than ``MAX_LINE`` before it, a line too long to leave a newline in the chunk
    before it (some long enough to leave a whole task without one), or nothing special; CRLF
    line ends here and there; a last line with no newline."""
    rng = random.Random(seed)
    out = bytearray()

    def put(text: bytes) -> None:
        out.extend(text + rng.choice((b"\n", b"\n", b"\r\n")))

    for point in range(1, grid_points):
        grid = point * CHUNK
        scenario = point // TASK_CHUNKS % 6  # tasks start at every other boundary: each case at both
        hit = rng.choice(HITS)
        lead = (len(hit) + 1, 0, len(hit) // 2, rng.randrange(MAX_LINE, CHUNK - 400), 600, 600)[scenario]
        if len(out) > grid - lead - 300:
            continue  # a long line ran past this boundary
        while len(out) < grid - lead - 300:
            put(ordinary(rng) if rng.random() < 0.8 else rng.choice(HITS))
        out.extend(b"x" * (grid - lead - len(out) - 1) + b"\n")  # the next line starts lead bytes before the boundary
        if scenario == 0:
            out.extend(hit + b"\n")
        elif scenario in (1, 2):
            put(hit)
        elif scenario == 3:
            put(b"y" * (lead - len(hit) // 2) + hit + b"z" * rng.randrange(3 * CHUNK))
        elif scenario == 4:
            put(b"w" * rng.randrange(2 * CHUNK, 4 * TASK) + hit)
    out.extend(FATAL)
    return bytes(out)


def single_process(path, base: int = 0) -> list:
    with open(path, "rb") as stream:
        stream.seek(base)
        chunks = iter(lambda: stream.read(CHUNK), b"")
        return list(classifier._candidates(chunks, classifier._patterns(default_catalog())))


def parallel(path, base: int = 0, workers: int = 2) -> list:
    with open(path, "rb") as stream:
        return list(classifier._parallel_candidates(stream.fileno(), base, classifier._patterns(default_catalog()), workers))


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("base", [0, 13])
def test_parallel_scan_finds_the_single_process_lines(tmp_path, seed, base):
    path = tmp_path / "boundaries.log"
    path.write_bytes(boundary_log(seed))
    expected = single_process(path, base)
    assert len(expected) > 1000
    assert parallel(path, base) == expected
    assert parallel(path, base, workers=3) == expected


def test_the_boundary_log_exercises_every_case(tmp_path):
    data = boundary_log(1)
    unclean = [g for g in range(CHUNK, len(data), CHUNK) if b"\n" not in data[g - CHUNK : g]]
    assert len(unclean) > 20
    assert any(g + CHUNK in unclean and g % TASK == 0 for g in unclean)  # a task without a start
    assert any(len(line) > MAX_LINE and any(hit in line for hit in HITS) for line in data.split(b"\n"))
    assert b"\r\n" in data and not data.endswith(b"\n")
    tasks = range(TASK, len(data), TASK)
    assert any(data[g - 1] == ord("\n") and any(data.startswith(hit, g) for hit in HITS) for g in tasks)
    assert any(any(data.endswith(hit + b"\n", 0, g) for hit in HITS) for g in tasks)
    assert any(any(data.find(hit, g - len(hit) + 1, g + len(hit) - 1) != -1 for hit in HITS) for g in tasks)
    carries = [g - data.rfind(b"\n", g - CHUNK, g) - 1 for g in tasks if b"\n" in data[g - CHUNK : g]]
    assert max(carries) >= MAX_LINE  # a task starts inside an overlong line


@pytest.fixture
def forced_parallel(monkeypatch):
    """classify_file takes the parallel path even for small files; records that it did."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs")
    monkeypatch.setattr(classifier, "_PARALLEL_MIN", 0)
    calls = []
    scan = classifier._parallel_candidates

    def recording(*args):
        calls.append(args)
        return scan(*args)

    monkeypatch.setattr(classifier, "_parallel_candidates", recording)
    return calls


def single_process_verdict(path, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(classifier, "_PARALLEL_MIN", 1 << 62)
        return classify_file(path)


def noise(rng: random.Random, size: int) -> bytearray:
    out = bytearray()
    while len(out) < size:
        out.extend(ordinary(rng) + b"\n")
    return out


def test_verdict_with_the_fatal_line_straddling_a_task_boundary(tmp_path, monkeypatch, forced_parallel):
    rng = random.Random(5)
    out = noise(rng, 20 * TASK)
    grid = (len(out) // TASK + 1) * TASK
    out.extend(b"[ RUN      ] Suite.Case\n" + b"x" * (grid - len(out) - 24 - 60) + b"\n")
    line = out.count(b"\n") + 1
    out.extend(FATAL + b"\n[  FAILED  ] Suite.Case (0 ms)\n" + noise(rng, 5 * TASK) + b"[  PASSED  ] 0 tests.\n")
    path = tmp_path / "straddle.log"
    path.write_bytes(bytes(out))
    verdict = classify_file(path)
    assert forced_parallel
    assert (verdict.outcome, verdict.category) == (Outcome.ENV_FAULT, EnvCategory.DEVICE_MISSING)
    assert verdict.evidence[0].line == line
    assert verdict == single_process_verdict(path, monkeypatch)


def test_verdict_from_an_overlong_line_across_boundaries(tmp_path, monkeypatch, forced_parallel):
    rng = random.Random(6)
    out = noise(rng, 10 * TASK)
    line = out.count(b"\n") + 1
    out.extend(b"y" * (3 * CHUNK + 100) + FATAL + b"z" * (2 * CHUNK) + b"\n" + noise(rng, 10 * TASK))
    path = tmp_path / "overlong.log"
    path.write_bytes(bytes(out))
    verdict = classify_file(path)
    assert forced_parallel
    assert verdict.category is EnvCategory.DEVICE_MISSING and verdict.evidence[0].line == line
    assert verdict == single_process_verdict(path, monkeypatch)


def test_verdict_with_crlf_and_the_fatal_line_last_without_a_newline(tmp_path, monkeypatch, forced_parallel):
    rng = random.Random(7)
    out = noise(rng, 30 * TASK).replace(b"\n", b"\r\n")
    line = out.count(b"\n") + 1
    out.extend(FATAL + b"\r")
    path = tmp_path / "crlf.log"
    path.write_bytes(bytes(out))
    verdict = classify_file(path)
    assert forced_parallel
    assert verdict.category is EnvCategory.DEVICE_MISSING
    assert (verdict.evidence[0].line, verdict.evidence[0].text) == (line, FATAL.decode())
    assert verdict == single_process_verdict(path, monkeypatch)


@pytest.mark.parametrize("name", sorted(p.name for p in LOGS.glob("*.log")))
def test_real_transcripts_in_tiny_chunks_and_tasks(name, monkeypatch, forced_parallel):
    monkeypatch.setattr(classifier, "_CHUNK", 64)
    monkeypatch.setattr(classifier, "_TASK_CHUNKS", 1)
    verdict = classify_file(LOGS / name)
    assert forced_parallel
    assert verdict == single_process_verdict(LOGS / name, monkeypatch)


def test_classify_stream_of_an_open_file_reads_it_from_where_it_is(tmp_path, monkeypatch, forced_parallel):
    path = tmp_path / "boundaries.log"
    path.write_bytes(boundary_log(4))
    with open(path, "rb") as stream:
        stream.read(1000)
        verdict = classify_stream(stream)
        assert stream.read() == b""
    assert forced_parallel
    with monkeypatch.context() as patch:
        patch.setattr(classifier, "_PARALLEL_MIN", 1 << 62)
        with open(path, "rb") as stream:
            stream.read(1000)
            assert classify_stream(stream) == verdict


def test_streams_and_small_files_stay_in_one_process(tmp_path, monkeypatch):
    monkeypatch.setattr(classifier, "_PARALLEL_MIN", 1000)
    path = tmp_path / "small.log"
    path.write_bytes(b"x\n" * 400)
    with open(path, "rb") as small:
        assert classifier._parallel_workers(small) == 0
    assert classifier._parallel_workers(io.BytesIO(b"x\n" * 1000)) == 0
    read, write = os.pipe()
    with open(read, "rb") as pipe, open(write, "wb") as writer:
        writer.write(b"x\n" * 1000)
        writer.flush()
        assert classifier._parallel_workers(pipe) == 0


def test_one_big_file_after_another_both_in_parallel(tmp_path, monkeypatch, forced_parallel):
    """The first leaves no thread behind that would keep the second from forking."""
    path = tmp_path / "boundaries.log"
    path.write_bytes(boundary_log(5, grid_points=100))
    assert classify_file(path) == classify_file(path) == single_process_verdict(path, monkeypatch)
    assert len(forced_parallel) == 2


def dying_worker(start, stop):
    os._exit(9)


def test_a_worker_that_dies_is_an_error_not_a_hang(tmp_path, monkeypatch, forced_parallel):
    path = tmp_path / "boundaries.log"
    path.write_bytes(boundary_log(6, grid_points=100))
    monkeypatch.setattr(classifier, "_scan_task", dying_worker)
    with pytest.raises(BrokenProcessPool):
        classify_file(path)
