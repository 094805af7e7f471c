"""Flakiness attribution and history figures, on histories recorded into a real database
(SQLite and PostgreSQL) and read back, as `harness history` reads them."""

from __future__ import annotations

import json
import random

import pytest
from typer.testing import CliRunner

import harness.cli  # noqa: F401  (registers the commands)
from harness.cli.app import app
from harness.core.flakiness import analyze
from harness.core.outcomes import Outcome
from harness.core.records import CaseRecord, RunInfo
from harness.history.store import History

HOSTS = ("wh-01", "wh-02", "wh-03")
P, F, E = Outcome.PASS, Outcome.FAIL, Outcome.ENV_FAULT


def record(url: str, table: dict[str, list[str]], *, check: str = "layernorm-bw-nightly", refs=None, other_checks=True,
           category: str = "hugepages") -> None:
    """Record runs from ``table``: per host a string, one letter per run (oldest first):
    p pass, f fail, e env fault, . not run. ``refs``: the ref of each run (default one ref)."""
    n = len(next(iter(table.values())))
    refs = refs or ["84f83fcf55"] * n
    letters = {"p": P, "f": F, "e": E}
    with History.open(url) as history:
        for i in range(n):
            run_id = f"2026110{1 + i // 10}T{i % 10:02d}0000Z-{i:04x}"
            cases = []
            for host, row in table.items():
                if row[i] == ".":
                    continue
                outcome = letters[row[i]]
                for case in ("LayerNormBackwardOpTest.NIGHTLY_Random", "LayerNormBackwardOpTest.NIGHTLY_Shapes"):
                    failing = outcome is not P and (case.endswith("Random") or outcome is E)
                    cases.append(CaseRecord(
                        run_id, "nightly", check, case, host, outcome if failing else P,
                        category if failing and outcome is E else None, board="n150", device="0",
                        image_digest=f"sha256:{refs[i]}00", ref=refs[i],
                    ))
                if other_checks:  # a steady check beside it: never flaky, never blamed
                    cases.append(CaseRecord(run_id, "nightly", "device-smoke", "device-smoke", host, P, board="n150", ref=refs[i]))
            history.record(RunInfo(run_id, "nightly", f"2026-11-{1 + i // 10:02d}T{i % 10:02d}:00:00+00:00", ref=refs[i]), cases)


def report(url: str, last: int = 50, **kw):
    with History.open(url) as history:
        runs = history.runs(last)
        cases = history.cases([r.run_id for r in runs], details=False)
    return analyze(runs, cases, **kw)


def test_failures_that_are_env_faults_on_one_host_follow_the_host(history_url):
    record(history_url, {
        "wh-01": "pppppppppp",
        "wh-02": "pppppppppp",
        "wh-03": "pppppeeeee",  # its hugepages went away in run 5
    })
    got = report(history_url)
    (attribution,) = got.attributions
    assert (attribution.check, attribution.cause, attribution.subject) == ("layernorm-bw-nightly", "host", "wh-03")
    assert "5 of 5 failures are environment faults (hugepages 5), on wh-03 5" in attribution.summary
    assert any("on wh-03" in line and "env_fault/hugepages" in line for line in attribution.evidence)
    hosts = {h.host: h for h in got.hosts}
    assert hosts["wh-03"].worse and hosts["wh-03"].older_rate == 0 and hosts["wh-03"].newer_rate == pytest.approx(5 / 10)
    assert not hosts["wh-01"].worse and hosts["wh-01"].env_fault_rate == 0
    assert hosts["wh-03"].categories == (("hugepages", 5),)
    check = {c.check: c for c in got.checks}["layernorm-bw-nightly"]
    assert check.pass_rate == pytest.approx(25 / 30) and check.env_faults == 5 and check.failed == 0
    assert {r.kind for r in check.reds} == {"env fault"} and {r.host for r in check.reds} == {"wh-03"}


def test_real_failures_concentrated_on_one_host_follow_the_host(history_url):
    record(history_url, {
        "wh-01": "pppppppppppp",
        "wh-02": "pfpfpfppfpfp",  # a sick card: wrong sums, but only there
        "wh-03": "pppppppppppp",
    })
    (attribution,) = report(history_url).attributions
    assert (attribution.cause, attribution.subject) == ("host", "wh-02")
    assert "5 of 5 failures on wh-02 (it failed 5 of 12 there), while the other hosts failed 0 of 24" in attribution.summary
    assert "wh-02: 5 fail, 7 pass" in attribution.evidence


def test_failures_spread_over_healthy_hosts_follow_the_test(history_url):
    """The seed's NIGHTLY test on random mean-zero data: it fails now and then on every healthy
    host, on the same ref, without an environment fault."""
    record(history_url, {
        "wh-01": "ppfpppfppppf",
        "wh-02": "pfppppppfppp",
        "wh-03": "ppppfpppppfp",
    })
    got = report(history_url)
    (attribution,) = got.attributions
    assert (attribution.cause, attribution.subject) == ("test", "layernorm-bw-nightly")
    assert "the test or the code: 7 real failure(s) over 3 host(s) (wh-01, wh-02, wh-03), 3 of them also passing it" in attribution.summary
    assert "no environment fault" in attribution.summary and "ref 84f83fcf55 both passed and failed" in attribution.summary
    assert {c.check: c for c in got.checks}["layernorm-bw-nightly"].failed == 7


def test_failures_that_start_with_a_ref_are_a_regression_named_by_its_first_ref(history_url):
    refs = ["a1", "a1", "b2", "b2", "c3", "d4", "d4", "e5", "e5", "f6"]
    record(history_url, {
        "wh-01": "ppppp" + "fffff",
        "wh-02": "ppppp" + "f.fff",
        "wh-03": "pp.pp" + "fffff",
    }, refs=refs)
    (attribution,) = report(history_url).attributions
    assert (attribution.cause, attribution.subject) == ("regression", "d4")
    assert "a regression starting at ref d4 (first failed in run " in attribution.summary
    assert "14 executions on 3 earlier ref(s) all passed, 14 on ref d4 and later all failed, on 3 host(s)" in attribution.summary
    assert attribution.evidence[:3] == ("ref a1: pass x6", "ref b2: pass x5", "ref c3: pass x3")


def test_a_regression_by_image_digest_when_no_ref_is_known(history_url):
    # A local checkout has no ref: its builds differ by image digest.
    refs = ["", "", "", "", "", "", ""]
    record(history_url, {"wh-01": "pppffff", "wh-02": "pppffff"}, refs=refs)
    with History.open(history_url) as history:  # give each run an image of its own, as builds do
        runs = history.runs()
        cases = history.cases([r.run_id for r in runs], details=False)
    images = {run.run_id: f"sha256:{'0' if i >= 4 else '1'}{i:063d}" for i, run in enumerate(runs)}
    cases = [CaseRecord(**{**c.__dict__, "image_digest": images[c.run_id]}) for c in cases]
    attributions = [a for a in analyze(runs, cases).attributions]
    assert [(a.cause, a.subject) for a in attributions] == [("regression", images[runs[3].run_id])]


def test_a_ref_that_both_passed_and_failed_is_no_regression():
    refs = ["a1"] * 4 + ["b2"] * 4
    runs = [RunInfo(f"r{i}", "nightly", f"2026-11-01T00:0{i}:00+00:00") for i in reversed(range(8))]
    rows = {"wh-01": "ppppfpff", "wh-02": "pppppfpf"}
    cases = [
        CaseRecord(f"r{i}", "nightly", "bw", "bw", host, F if row[i] == "f" else P, ref=refs[i])
        for host, row in rows.items() for i in range(8)
    ]
    (attribution,) = analyze(runs, cases).attributions
    assert attribution.cause == "test"


def test_checks_that_only_pass_or_only_fail_are_not_flaky():
    runs = [RunInfo(f"r{i}", "nightly", f"2026-11-01T00:0{i}:00+00:00") for i in reversed(range(4))]
    cases = [CaseRecord(f"r{i}", "nightly", c, c, "wh-01", o) for i in range(4) for c, o in (("good", P), ("broken", F))]
    got = analyze(runs, cases)
    assert got.attributions == ()
    assert {c.check: c.pass_rate for c in got.checks} == {"good": 1.0, "broken": 0.0}


def test_status_of_an_execution_is_its_worst_case():
    runs = [RunInfo("r0", "nightly", "2026-11-01T00:00:00+00:00")]
    cases = [
        CaseRecord("r0", "nightly", "bw", "a", "wh-01", P),
        CaseRecord("r0", "nightly", "bw", "b", "wh-01", E, "mount"),
        CaseRecord("r0", "nightly", "bw", "c", "wh-01", F),
        CaseRecord("r0", "nightly", "bw", "d", "wh-02", Outcome.XFAIL),
        CaseRecord("r0", "nightly", "bw", "e", "wh-02", Outcome.SKIP),
    ]
    (check,) = analyze(runs, cases).checks
    assert (check.executions, check.passed, check.failed, check.env_faults) == (2, 1, 1, 0)


def test_history_cli_shows_tables_reds_and_attributions(history_url):
    record(history_url, {"wh-01": "pppppppppp", "wh-02": "pppppppppp", "wh-03": "pppppeeeee"})
    result = CliRunner().invoke(app, ["history", "--history", history_url])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "10 run(s) (the last 20 asked)" in out
    assert "layernorm-bw-nightly  10    30          83%" in out
    assert "layernorm-bw-nightly: env fault/hugepages on wh-03 in " in out
    assert "wh-03  20          25%             hugepages 5  worse: 0% -> 50%" in out
    assert "getting worse: wh-03" in out
    assert "layernorm-bw-nightly: host: wh-03" in out

    by_check = json.loads(CliRunner().invoke(app, ["history", "--json", "--check", "device-smoke", "--history", history_url]).stdout)
    assert [c["check"] for c in by_check["checks"]] == ["device-smoke"] and by_check["flaky"] == []
    by_host = json.loads(CliRunner().invoke(app, ["history", "--json", "--host", "wh-03", "--last", "3", "--history", history_url]).stdout)
    assert by_host["runs"] == 3 and [h["host"] for h in by_host["hosts"]] == ["wh-03"]
    assert by_host["hosts"][0]["env_fault_rate"] == 0.5 and by_host["hosts"][0]["categories"] == {"hugepages": 3}
    none = CliRunner().invoke(app, ["history", "--check", "no-such-check", "--history", history_url])
    assert none.exit_code == 0 and "no run with check no-such-check" in none.stdout


def test_random_histories_never_crash_and_always_attribute_flaky_checks():
    rng = random.Random(11)
    for _ in range(200):
        n = rng.randint(1, 12)
        runs = [RunInfo(f"r{i}", "s", f"2026-11-01T00:{i:02d}:00+00:00", ref=rng.choice(["", "a", "b"])) for i in reversed(range(n))]
        cases = [
            CaseRecord(f"r{i}", "s", rng.choice(["x", "y"]), rng.choice(["c1", "c2"]), rng.choice(HOSTS),
                       o := rng.choice(list(Outcome)), "mount" if o is E else ("internal" if o is Outcome.ERROR else None),
                       ref=rng.choice(["", "a", "b"]), image_digest=rng.choice(["", "sha256:1", "sha256:2"]))
            for i in range(n) for _ in range(rng.randint(0, 6))
        ]
        got = analyze(runs, cases)
        json.dumps(got.to_json())
        for a in got.attributions:
            assert a.cause in ("host", "regression", "test") and a.summary


def test_env_faults_on_several_hosts_name_every_host_most_faults_first():
    runs = [RunInfo(f"r{i}", "nightly", f"2026-11-01T00:0{i}:00+00:00") for i in reversed(range(6))]
    rows = {"wh-01": "pppeee", "wh-02": "ppppep", "wh-03": "pppppp"}
    cases = [
        CaseRecord(f"r{i}", "nightly", "bw", "bw", host, {"p": P, "e": E}[row[i]], "docker" if row[i] == "e" else None)
        for host, row in rows.items() for i in range(6)
    ]
    (attribution,) = analyze(runs, cases).attributions
    assert (attribution.cause, attribution.subject) == ("host", "wh-01,wh-02")
    assert "4 of 4 failures are environment faults (docker 4), on wh-01 3, wh-02 1" in attribution.summary


def test_a_flaky_test_failing_in_the_last_two_runs_is_no_regression_yet():
    runs = [RunInfo(f"r{i}", "nightly", f"2026-11-01T00:0{i}:00+00:00", ref=f"ref{i}") for i in reversed(range(6))]
    cases = [CaseRecord(f"r{i}", "nightly", "bw", "bw", "wh-01", F if i >= 4 else P, ref=f"ref{i}") for i in range(6)]
    (attribution,) = analyze(runs, cases).attributions
    assert attribution.cause == "test"
    cases = [CaseRecord(f"r{i}", "nightly", "bw", "bw", "wh-01", F if i >= 3 else P, ref=f"ref{i}") for i in range(6)]
    (attribution,) = analyze(runs, cases).attributions
    assert (attribution.cause, attribution.subject) == ("regression", "ref3")
