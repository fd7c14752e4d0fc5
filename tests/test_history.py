"""``accelbench history`` on stored daily series (tests/history_series.py: rounds analysed from perf records, one
run a day): the issue's acceptance series (a lasting 8 % drop after a single bad day: one change point, the bad
day an outlier, exit 3; without the drop, exit 0), what changed at the change point and earlier, ``--check``'s
statuses (contended newest run 7, too few points 5 with the minimum, an improvement 0), ``debug.*`` settings as
what changed within one workload, the windows, an import placed at its log's own time, the non-compliant mark,
and every format. The CLI runs in this process."""
from __future__ import annotations

import json

import pytest

from .history_series import RATE, day_doc, rate_series, store_series
from .test_policy_views import planned
from .test_results import fill


def history(accelbench, db, *args):
    done = accelbench("history", "--db", db, "--format", "json", *args)
    assert done.returncode in (0, 3, 5, 7), done.stderr
    return done.returncode, json.loads(done.stdout)


def test_a_lasting_drop_after_a_single_bad_day_is_one_change_point_and_exit_3(accelbench, tmp_path):
    db = tmp_path / "results.db"
    store_series(db, rate_series(30, drop_at=20, bad_day=10),
                 env={5: {"probe host_kernel": "6.1.0-29-amd64"}, 20: {"torch": "2.14.0+cpu"}})
    code, found = history(accelbench, db, "--check")
    assert code == 3
    (w,) = found["workloads"]
    (change,) = w["change_points"]
    assert change["run_id"] == "night020" and change["at"].startswith("2026-09-21")
    low, high = change["interval95"]
    assert low < change["size"] < high < 0 and -0.095 < change["size"] < -0.065 and change["verdict"] == "regression"
    assert change["before"] == {"first_run": "night000", "last_run": "night019", "points": 19}  # the bad day left out
    assert change["after"] == {"first_run": "night020", "last_run": "night029", "points": 10}
    assert [(c["key"], c["before"], c["after"]) for c in change["changed_here"]] == \
        [("torch", "2.13.0+cpu", "2.14.0+cpu")]
    assert [(c["key"], c["run_id"]) for c in change["also_changed_earlier_without_effect"]] == \
        [("probe host_kernel", "night005")]
    outliers = [p for p in w["points"] if p["outlier"]]
    assert [p["run_id"] for p in outliers] == ["night010"] and not outliers[0]["outlier"]["pending"]
    assert w["verdict"]["state"] == "regression"
    text = accelbench("history", "--db", db, "--check")
    assert text.returncode == 3
    out = text.stdout
    assert "changed here: torch 2.13.0+cpu -> 2.14.0+cpu" in out and "outlier: a single bad point" in out
    assert "also changed earlier without effect: probe host_kernel 6.1.0-28-amd64 -> 6.1.0-29-amd64 (run night005" in out
    assert "before: night000 .. night019 (19 points), after: night020 .. night029 (10 points)" in out
    assert "▁" in out and "█" in out  # the sparklines


def test_the_same_series_without_the_drop_exits_0_and_names_the_bad_day(accelbench, tmp_path):
    db = tmp_path / "results.db"
    store_series(db, rate_series(30, bad_day=10))
    code, found = history(accelbench, db, "--check")
    (w,) = found["workloads"]
    assert code == 0 and w["change_points"] == [] and w["verdict"]["state"] == "no change"
    assert [p["run_id"] for p in w["points"] if p["outlier"]] == ["night010"]


def test_an_improvement_exits_0_and_a_new_bad_night_is_pending_not_a_change(accelbench, tmp_path):
    db = tmp_path / "results.db"
    rates = rate_series(20, drop_at=10, drop=0.06) + [RATE * 1.06 * 0.85]  # up 6 %, then one bad night
    store_series(db, rates)
    code, found = history(accelbench, db, "--check")
    (w,) = found["workloads"]
    assert code == 0 and [c["verdict"] for c in w["change_points"]] == ["improvement"]
    assert w["points"][-1]["outlier"]["pending"] is True  # one night is not yet a shift: not judged a change


def test_a_contended_newest_run_is_left_out_named_and_exit_7_unless_a_regression_shows(accelbench, tmp_path):
    flat, dropped = tmp_path / "flat.db", tmp_path / "dropped.db"
    store_series(flat, rate_series(12), contended={11: True, 4: True})
    store_series(dropped, rate_series(16, drop_at=8), contended={15: True})
    code, found = history(accelbench, flat, "--check")
    (w,) = found["workloads"]
    assert code == 7 and w["verdict"]["state"] == "contended"
    assert [p["run_id"] for p in w["points"] if p["contended"]] == ["night004", "night011"]
    assert w["points"][4]["figures"]["tokens_per_s_per_device"] is None  # left out of the figures
    out = accelbench("history", "--db", flat, "--check").stdout
    assert "left out, contended: run night004" in out and "not judged: the newest run night011 was contended" in out
    assert history(accelbench, dropped, "--check")[0] == 3  # the runs before it still show the drop


def test_too_few_points_exit_5_stating_the_minimum(accelbench, tmp_path):
    db = tmp_path / "results.db"
    store_series(db, rate_series(5))
    done = accelbench("history", "--db", db, "--check")
    assert done.returncode == 5
    assert "5 point(s): a change needs 3 on each side (6)" in done.stdout
    assert "fewer than 6 judged points, the fewest a change can be told on (3 on each side); exit 5" in done.stdout


def test_a_debug_setting_stays_in_the_workload_and_is_named_where_it_changed(accelbench, tmp_path):
    db = tmp_path / "results.db"
    store_series(db, rate_series(14, drop_at=7, drop=-0.3), debug={7: {"compute_delay_ms": 40.0}})
    code, found = history(accelbench, db, "--check")
    (w,) = found["workloads"]  # one workload, not one per debug setting
    (change,) = w["change_points"]
    assert code == 3 and change["run_id"] == "night007"
    assert [(c["key"], c["before"], c["after"]) for c in change["changed_here"]] == \
        [("debug.compute_delay_ms", "-", "40.0")]
    assert "debug.compute_delay_ms" not in w["settings"]


def test_windows_since_and_last(accelbench, tmp_path):
    db = tmp_path / "results.db"
    store_series(db, rate_series(30, drop_at=20))
    assert [p["run_id"] for p in history(accelbench, db, "--last", "4")[1]["workloads"][0]["points"]] == \
        ["night026", "night027", "night028", "night029"]
    code, found = history(accelbench, db, "--since", "2026-09-22", "--check")  # after the drop: nothing to see
    assert code == 0 and found["workloads"][0]["points"][0]["run_id"] == "night021"
    assert found["workloads"][0]["change_points"] == []
    assert history(accelbench, db, "--since", "2026-09-27", "--check")[0] == 5
    for bad in (("--since", "yesterday"), ("--last", "0")):
        refused = accelbench("history", "--db", db, *bad)
        assert refused.returncode == 2 and bad[1] in refused.stderr and "Traceback" not in refused.stderr
    nothing = accelbench("history", "--db", db, "--since", "2030-01-01")
    assert nothing.returncode == 2 and "move --since back" in nothing.stderr


def test_select_by_run_gives_its_workloads_whole_history_and_filters_narrow(accelbench, tmp_path):
    db = tmp_path / "results.db"
    store_series(db, rate_series(8))
    store_series(db, rate_series(8, seed=2), case="gpt3_tiny", prefix="other")
    (w,) = history(accelbench, db, "night003")[1]["workloads"]
    assert len(w["points"]) == 8 and w["label"].startswith("gpt2_tiny")
    assert [x["label"][:9] for x in history(accelbench, db, "case=gpt3_tiny")[1]["workloads"]] == ["gpt3_tiny"]
    assert len(history(accelbench, db)[1]["workloads"]) == 2
    missing = accelbench("history", "--db", db, "case=bert")
    assert missing.returncode == 2 and "no attempt matches" in missing.stderr


def test_an_import_counts_at_its_logs_own_time(accelbench, tmp_path):
    """An imported run is stored after the others, but measured before them: its point comes first."""
    db = tmp_path / "results.db"
    store_series(db, rate_series(6))
    old = day_doc(-3, RATE, prefix="imported")
    old["source"] = "import:torchtitan/1"
    fill(db, [old])
    points = history(accelbench, db)[1]["workloads"][0]["points"]
    assert points[0]["run_id"] == "imported-03" and points[0]["at_source"] == "log time stamp"
    assert points[0]["at"].startswith("2026-08-29")


def test_a_non_compliant_point_is_marked_beside_compliant_ones(accelbench, tmp_path):
    db = tmp_path / "results.db"
    docs = [day_doc(d, r) for d, r in enumerate(rate_series(8))]
    _, departs = planned("gpt2_tiny:torch:cpu:1:2", "model.n_layer=3")
    docs[6]["compliance"] = departs  # the case's policy was tightened: the same workload, judged otherwise
    fill(db, docs)
    w = history(accelbench, db)[1]["workloads"][0]
    assert [p["compliant"] for p in w["points"]][5:7] == [None, False] and w["non_compliant_points"] == 1
    md = accelbench("history", "--db", db, "--format", "markdown").stdout
    assert "| night006 |" in md and "non-compliant |" in md.split("| night006 |")[1].splitlines()[0]
    assert "non-compliant points sit beside compliant ones in this series (marked)" in md


@pytest.mark.parametrize("fmt", ["terminal", "markdown", "html"])
def test_every_format_names_each_run_and_the_change(accelbench, tmp_path, fmt):
    db = tmp_path / "results.db"
    store_series(db, rate_series(12, drop_at=6, drop=-0.1))
    out = tmp_path / f"history.{fmt}"
    done = accelbench("history", "--db", db, "--format", fmt, "-o", out)
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert "change point (regression): -10." in text or "change point (regression): -9." in text
    if fmt != "terminal":
        assert all(f"night{d:03d}" in text for d in range(12))


def test_a_round_stores_its_vendor_files_sha256_and_a_changed_file_is_named(accelbench, tmp_path):
    import hashlib

    from run_benchmarks.execute.outcome import result_document
    from run_benchmarks.results.rounds.result import RoundResult
    from run_benchmarks.planner.build import build_run_plan
    from run_benchmarks.planner.inputs import load_inputs

    from .conftest import ROOT

    case = build_run_plan(load_inputs(ROOT), ["gpt2_tiny:torch:cpu:1:1"], "v", tmp_path / "logs").cases[0]
    record = result_document(case, RoundResult(str(case.name), 1, tmp_path, "failed"), {})
    assert record.environment.vendor_file_sha256 == hashlib.sha256(
        (ROOT / "vendors/cpu/vendor.yaml").read_bytes()).hexdigest()
    db = tmp_path / "results.db"
    docs = [day_doc(d, r) for d, r in enumerate(rate_series(8, drop_at=4, drop=-0.2))]
    for doc in docs[4:]:
        doc["environment"]["vendor_file_sha256"] = "e" * 64
    fill(db, docs)
    (change,) = history(accelbench, db)[1]["workloads"][0]["change_points"]
    assert [(c["key"], c["before"], c["after"]) for c in change["changed_here"]] == \
        [("vendor file sha256", "f" * 16, "e" * 16)]
