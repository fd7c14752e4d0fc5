"""A history across machines and stores (issue 46): bundles of one machine's nightly runs imported into another's
store join the same workload's series, in time order; importing a bundle again is refused and never doubles a
point; the same history read from PostgreSQL (a ``store copy`` of the SQLite store) is the same JSON. Runs have
their folders (results.json and a log), as a run leaves them, so that ``bundle`` packs them."""
from __future__ import annotations

import json
from pathlib import Path

from run_benchmarks.results.store.schema import row_from_document
from run_benchmarks.results.store.store import ResultStore

from .history_series import day_doc, rate_series
from .postgres_stores import pg  # noqa: F401 - the fixture


def machine(db: Path, logs: Path, days: range, rates: list[float], host: str) -> None:
    """One run a day of ``days`` into ``db``, each with its run folder under ``logs``."""
    with ResultStore(db) as store:
        for day in days:
            doc = day_doc(day, rates[day], env={"host": host})
            folder = logs / doc["run_id"] / "gpt2_tiny-torch-cpu-1x1" / "round1"
            folder.mkdir(parents=True)
            doc.update(schema="accelbench.results/1", results_path=str(folder / "results.json"))
            (folder / "results.json").write_text(json.dumps(doc))
            (folder / "launcher.log").write_text("ok\n")
            store.begin_run(doc["run_id"], doc["started_at"], ["accelbench"], "abc123", str(logs / doc["run_id"]))
            store.add_attempt(row_from_document(doc))
            store.end_run(doc["run_id"], doc["ended_at"])


def points(accelbench, db) -> list[str]:
    done = accelbench("history", "--db", db, "--format", "json")
    assert done.returncode == 0, done.stderr
    (workload,) = json.loads(done.stdout)["workloads"]
    return [p["run_id"] for p in workload["points"]]


def test_bundles_from_another_machine_join_the_series_once(accelbench, tmp_path):
    rates = rate_series(12, drop_at=6)
    a, b = tmp_path / "a", tmp_path / "b"
    machine(a / "results.db", a / "logs", range(0, 12, 3), rates, "bench-a")  # every third night on one machine
    machine(b / "results.db", b / "logs", [d for d in range(12) if d % 3], rates, "bench-b")  # the others here
    for day in range(0, 12, 3):
        bundle = tmp_path / f"night{day:03d}.tar.gz"
        made = accelbench("bundle", f"night{day:03d}", "--db", a / "results.db", "-o", bundle)
        assert made.returncode == 0, made.stderr
        assert accelbench("import", bundle, "--db", b / "results.db").returncode == 0
    assert points(accelbench, b / "results.db") == [f"night{d:03d}" for d in range(12)]  # one series, in time order
    again = accelbench("import", tmp_path / "night003.tar.gz", "--db", b / "results.db")
    assert again.returncode == 2 and "already holds run night003; nothing was imported" in again.stderr
    assert points(accelbench, b / "results.db") == [f"night{d:03d}" for d in range(12)]  # no point twice
    out = json.loads(accelbench("history", "--db", b / "results.db", "--format", "json").stdout)
    (change,) = out["workloads"][0]["change_points"]
    assert change["run_id"] == "night006"
    # the machines take turns: the hosts changed here too, and 3 times before without effect
    assert [(c["key"], c["before"], c["after"]) for c in change["changed_here"]] == [("hosts", "bench-b", "bench-a")]
    assert [c["key"] for c in change["also_changed_earlier_without_effect"]] == ["hosts"] * 3


def test_the_history_reads_the_same_from_postgresql(accelbench, tmp_path, pg):
    lite = tmp_path / "results.db"
    machine(lite, tmp_path / "logs", range(12), rate_series(12, drop_at=6, drop=-0.1), "bench-a")
    assert accelbench("store", "copy", lite, pg.url).returncode == 0
    sqlite, postgres = (json.loads(accelbench("history", "--db", db, "--format", "json").stdout)
                        for db in (str(lite), pg.url))
    assert postgres == sqlite and sqlite["workloads"][0]["change_points"][0]["run_id"] == "night006"
