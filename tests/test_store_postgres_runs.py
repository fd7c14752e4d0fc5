"""Real runs into a PostgreSQL store (the private server, tests/infra/postgres.py): a run and a sweep at once on
one store, both landing; reading them back (runs, report, a sweep resumed with --check); a run bundled out of
PostgreSQL into SQLite; the server stopped during a round and the round there after it is back. Each run is the
suite's shortest (goldens.SHORT, one process); everything else against the server is in test_store_postgres.py
and test_store_postgres_cli.py, on synthetic rows."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from run_benchmarks.results.store.store import ResultStore

from .conftest import ROOT
from .goldens import SHORT
from .postgres_stores import every_text, fetch, pg  # noqa: F401 - pg: the fixture
from .test_store_faults import run_folders, wait_for
from .runner import ends_with_the_test

CASE = "gpt2_tiny:torch:cpu:1:1"


def start(tmp_path: Path, *args: str, env: dict) -> tuple[subprocess.Popen, Path]:
    err = tmp_path / f"stderr-{time.monotonic_ns()}.txt"
    proc = subprocess.Popen([sys.executable, "-m", "run_benchmarks.cli", *args], cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(ROOT), **env}, stdout=subprocess.PIPE,
                            stderr=open(err, "w"), text=True, preexec_fn=ends_with_the_test())
    return proc, err


def finish(proc: subprocess.Popen, err: Path) -> tuple[int, str, str]:
    try:
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out, err.read_text()


def test_a_run_and_a_sweep_at_once_both_land_and_read_back_and_bundle_into_sqlite(accelbench, pg, postgres, tmp_path):
    logs = tmp_path / "logs"
    store = ["--db", pg.url, "--log-root", str(logs)]
    env = {"PGPASSWORD": postgres.password}
    run = start(tmp_path, "run", CASE, *SHORT, *store, env=env)
    sweep = start(tmp_path, "sweep", CASE, "--grid", "train.micro_batch_size=1", *SHORT, *store, env=env)
    (run_code, run_out, run_err), (sweep_code, sweep_out, sweep_err) = finish(*run), finish(*sweep)
    assert run_code == 0, run_err[-3000:]
    assert sweep_code == 0, sweep_err[-3000:]
    assert f"stored in {pg.url} as run" in run_out
    listed = accelbench("runs", "--db", pg.url)
    assert listed.returncode == 0, listed.stderr
    with ResultStore(pg) as server:
        runs = {r["run_id"]: r for r in server.runs()}
        assert len(runs) == 2 and all(r["status"] == "done" and r["ok"] == 1 for r in runs.values()), runs
        assert all(run_id in listed.stdout for run_id in runs)
        attempts = server.attempts()
    assert [a["status"] for a in attempts] == ["ok", "ok"]
    # (the run's output may name the sweep too: a run says which others started beside it)
    (run_id,) = [r for r in runs if f"stored in {pg.url} as run {r}" in run_out]
    (sweep_id,) = set(runs) - {run_id}
    report = accelbench("report", run_id, sweep_id, "--format", "json", "--db", pg.url)
    assert report.returncode == 0, report.stderr
    assert sorted(row["run_id"] for row in json.loads(report.stdout)) == sorted(runs)
    # a sweep resumed reads its rounds from the store: with --check, every point against the references
    resumed = accelbench("sweep", "--resume", sweep_id, "--check", "--no-reference-expected", *store)
    assert resumed.returncode == 0, resumed.stderr
    assert "no reference" in (resumed.stdout + resumed.stderr).lower(), resumed.stdout + resumed.stderr
    # no row holds the password; the stored command line names the URL without one
    assert postgres.password not in every_text(pg, postgres.password)
    assert pg.url in runs[run_id]["argv"]
    # bundled out of PostgreSQL, imported into an SQLite store: the same rows, the logs under the new log root
    bundle = tmp_path / "run.tar.gz"
    made = accelbench("bundle", run_id, "--db", pg.url, "-o", str(bundle))
    assert made.returncode == 0, made.stderr
    lite = tmp_path / "elsewhere" / "results.db"
    assert accelbench("import", str(bundle), "--db", str(lite)).returncode == 0
    with ResultStore(pg) as server, ResultStore(lite) as file:
        (before,), (after,) = server.attempts(run_ids=[run_id]), file.attempts()
    assert Path(after["results_path"]) == lite.parent / Path(before["results_path"]).relative_to(logs)
    drop = ("id", "results_path", "record")
    assert {k: v for k, v in after.row.items() if k not in drop} == {k: v for k, v in before.row.items() if k not in drop}
    assert after["record"] == {**before["record"], "results_path": after["results_path"]}


def test_the_server_stopped_during_a_round_exits_4_and_the_round_lands_once_it_is_back(accelbench, pg, postgres,
                                                                                       tmp_path):
    logs = tmp_path / "logs"
    proc, err = start(tmp_path, "run", CASE, *SHORT, "--db", pg.url, "--log-root", str(logs),
                      env={"PGPASSWORD": postgres.password, "ACCELBENCH_STORE_RETRY_S": "2"})
    with _stopped_during_the_round(postgres, logs, proc):
        code, out, stderr = finish(proc, err)
        assert code == 4, stderr[-3000:]
    assert f"this attempt is NOT in the results store {pg.url}" in stderr
    assert "the database server could not be reached for 2 s" in stderr
    assert f"accelbench store repair --db {pg.url}" in stderr and "Traceback" not in stderr
    (run_id,) = run_folders(logs)
    (results,) = logs.glob(f"{run_id}/*/round1/results.json")
    assert '"status": "ok"' in results.read_text()  # the round's record stays in its run folder
    assert fetch(pg, "SELECT COUNT(*) AS n FROM attempts", postgres.password) == [{"n": 0}]
    listed = accelbench("runs", "--db", pg.url)  # the next command to open the store adds it
    assert listed.returncode == 0 and f"run {run_id}: marked done" in listed.stderr, listed.stderr
    with ResultStore(pg) as server:
        (attempt,) = server.attempts()
        assert attempt["status"] == "ok" and attempt["results_path"] == str(results)
        assert server.run(run_id)["status"] == "done"
    repaired = accelbench("store", "repair", "--db", pg.url, "--log-root", str(logs))
    assert repaired.returncode == 0 and f"run {run_id}: 0 attempt(s) added, 1 already stored" in repaired.stdout


class _stopped_during_the_round:
    """The server stopped once the run's round has begun (its round folder is there), started again after."""

    def __init__(self, postgres, logs: Path, proc: subprocess.Popen):
        self.postgres, self.logs, self.proc = postgres, logs, proc

    def __enter__(self) -> None:
        wait_for(lambda: any(self.logs.glob("*/*/round1")), "the round's start", proc=self.proc)
        self.postgres.stop()

    def __exit__(self, *exc) -> None:
        self.postgres.start()
