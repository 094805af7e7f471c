"""`harness run` records every case of the run into the history (on this machine, which has no
card: every card check is an environment fault, which is what gets recorded)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from typer.testing import CliRunner

import harness.cli  # noqa: F401  (registers the commands)
from harness.cli.app import app
from harness.cli.common import INVENTORY_ENV
from harness.core.historyurl import HISTORY_ENV
from harness.core.outcomes import Outcome
from harness.history.store import History

REPO = Path(__file__).resolve().parents[1]
JOB = REPO / "jobs" / "layernorm-bw.yaml"
REF = "ivoitovych/layernorm-bw-nightly-test-failure-bug-report"  # the job's image.ref


def test_a_run_is_recorded_with_its_context(history_url, tmp_path, monkeypatch):
    monkeypatch.delenv(INVENTORY_ENV, raising=False)
    result = CliRunner().invoke(app, ["run", str(JOB), "--out", str(tmp_path / "out"), "-q", "--history", history_url])
    assert result.exit_code == 3, result.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["history"]["recorded"] is True and summary["history"]["error"] is None
    with History.open(history_url) as history:
        (run,) = history.runs()
        assert (run.run_id, run.suite, run.exit_code, run.ref) == (summary["run_id"], "layernorm-bw", 3, REF)
        assert run.started == summary["started"] and run.finished == summary["finished"]
        cases = history.cases([run.run_id])
    assert len(cases) == 3
    assert {(c.check, c.outcome, c.category) for c in cases} == {
        (name, Outcome.ENV_FAULT, "driver-missing")
        for name in ("layernorm-bw-bugrepro", "layernorm-bw-nightly", "layernorm-bw-small-shapes")
    }
    assert {c.host for c in cases} == {summary["hosts"][0]["host"]}
    assert all(c.ref == REF and c.job == "layernorm-bw" and c.message and c.evidence for c in cases)
    assert f"history: {History.open(history_url).display}" in result.stdout

    # the same run seen by `harness history`
    shown = json.loads(CliRunner().invoke(app, ["history", "--json", "--history", history_url]).stdout)
    assert shown["runs"] == 1 and {c["env_faults"] for c in shown["checks"]} == {1}


def test_run_records_into_the_default_history(tmp_path, monkeypatch):
    monkeypatch.delenv(INVENTORY_ENV, raising=False)
    default = tmp_path / "data" / "history.sqlite"
    monkeypatch.setenv(HISTORY_ENV, str(default))
    result = CliRunner().invoke(app, ["run", str(JOB), "--out", str(tmp_path / "out"), "-q"])
    assert result.exit_code == 3, result.output
    with History.open(default) as history:
        assert len(history.runs()) == 1


def test_a_history_that_cannot_be_written_changes_no_verdict(tmp_path, monkeypatch):
    """The database refuses the cases (a trigger standing in for a full disk or a revoked
    grant): the run's verdicts and exit code stand; stderr and summary.json say what was lost."""
    monkeypatch.delenv(INVENTORY_ENV, raising=False)
    path = tmp_path / "history.sqlite"
    History.open(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON cases BEGIN SELECT RAISE(ABORT, 'disk quota exceeded'); END")
    result = CliRunner().invoke(app, ["run", str(JOB), "--out", str(tmp_path / "out"), "-q", "--history", str(path)])
    assert result.exit_code == 3, result.output
    assert "layernorm-bw: 3 env_fault" in result.stdout
    (line,) = [l for l in result.stderr.splitlines() if "history" in l]
    assert line.startswith("harness: run ") and f"not recorded: history {path}: cannot record run" in line
    assert line.endswith("disk quota exceeded")
    assert "Traceback" not in result.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["exit_code"] == 3 and summary["history"]["recorded"] is False
    assert "disk quota exceeded" in summary["history"]["error"]
    with History.open(path) as history:
        assert history.count() == (0, 0)  # one transaction: nothing half-recorded


def test_the_recorder_keeps_board_devices_image_and_masks_secrets(tmp_path):
    """What a lab run's events carry (cards from CheckStarted, the image from ImageReady, the
    board from the inventory) ends up in each row; a secret in a message is masked."""
    from harness.core.events import CheckFinished, CheckStarted, ImageReady, RunFinished
    from harness.core.inventory import load_inventory
    from harness.core.outcomes import CaseResult, Evidence, Verdict
    from harness.core.secretref import Masker
    from harness.core.spec import load_job
    from harness.orchestration.recorder import HistoryRecorder

    inventory = tmp_path / "lab.yaml"
    inventory.write_text(
        "hosts:\n"
        "  - {name: wh-01, transport: local, boards: [{type: n150, devices: [0]}, {type: p150, devices: [1]}]}\n"
    )
    job = load_job(JOB)
    (host,) = load_inventory(inventory).hosts
    path = tmp_path / "history.sqlite"
    history = History.open(path)
    recorder = HistoryRecorder(history, job, (host,), "run-1", "2026-11-24T08:00:00+00:00", Masker(["tok-123"]))
    failed = Verdict(Outcome.FAIL, message="token tok-123 leaked", evidence=(Evidence(7, "ASSERT tok-123", None),))
    recorder.on_event(ImageReady("wh-01", "tt-harness/layernorm-bw:abc", "sha256:feed"))
    recorder.on_event(CheckStarted("wh-01", "layernorm-bw-nightly", (1,)))
    recorder.on_event(CheckFinished("wh-01", "layernorm-bw-nightly", (
        CaseResult("NIGHTLY_Random", "LayerNormBackwardOpTest", failed, duration=2.5, check="layernorm-bw-nightly"),
    )))
    recorder.on_event(CheckFinished("wh-01", "layernorm-bw-bugrepro", (), "retried on another host"))
    recorder.on_event(RunFinished("run-1", 1, finished="2026-11-24T08:05:00+00:00"))
    assert recorder.recorded and not recorder.error
    (run,) = history.runs()
    assert (run.image_digest, run.ref, run.finished, run.exit_code) == ("sha256:feed", REF, "2026-11-24T08:05:00+00:00", 1)
    (case,) = history.cases(["run-1"])
    assert (case.case, case.board, case.device, case.image_digest, case.ref) == (
        "LayerNormBackwardOpTest.NIGHTLY_Random", "p150", "1", "sha256:feed", REF)
    assert case.message == "token *** leaked" and case.evidence == ("7: ASSERT ***",)
    assert case.log == "run-1/wh-01/layernorm-bw-nightly" and case.duration == 2.5
    history.close()


def test_an_attempt_retried_on_another_host_is_that_hosts_outcome_too(tmp_path):
    """A pooled check's env fault on one host, retried on another: the report shows the retry,
    the history keeps both (the first host's env-fault rate must not lose it)."""
    from harness.core.events import CheckFinished, RunFinished
    from harness.core.outcomes import CaseResult, EnvCategory, Verdict
    from harness.core.secretref import Masker
    from harness.core.spec import load_job
    from harness.orchestration.recorder import HistoryRecorder

    history = History.open(tmp_path / "history.sqlite")
    recorder = HistoryRecorder(history, load_job(JOB), (), "run-2", "2026-11-24T08:00:00+00:00", Masker())
    fault = Verdict.env_fault(EnvCategory.HUGEPAGES, "no 1G hugepages")
    recorder.on_event(CheckFinished("wh-01", "layernorm-bw-nightly", (), "env_fault/hugepages: retried on another host",
                                    retried=(CaseResult("layernorm-bw-nightly", "harness.layernorm-bw", fault, check="layernorm-bw-nightly"),)))
    recorder.on_event(CheckFinished("wh-02", "layernorm-bw-nightly", (
        CaseResult("layernorm-bw-nightly", "harness.layernorm-bw", Verdict(Outcome.PASS), check="layernorm-bw-nightly"),
    )))
    recorder.on_event(RunFinished("run-2", 0, finished="2026-11-24T08:01:00+00:00"))
    rows = {c.host: c for c in history.cases(["run-2"])}
    assert (rows["wh-01"].outcome, rows["wh-01"].category, rows["wh-01"].attempt) == (Outcome.ENV_FAULT, "hugepages", 1)
    assert (rows["wh-02"].outcome, rows["wh-02"].attempt) == (Outcome.PASS, 2)
    history.close()
