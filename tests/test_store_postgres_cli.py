"""Every command that reads or writes the store, against PostgreSQL (the private server, tests/infra/postgres.py),
as against SQLite: ``store copy`` of an SQLite store with imports, a sweep's points, PPO, finetune and loss-curve
rows into PostgreSQL and back, then runs, show, report, compare, table, reference record on either; bundles out
of PostgreSQL into SQLite and a re-imported bundle that never doubles a row. CLI in-process, synthetic rows (no
training runs: test_store_postgres_runs.py has the real ones)."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from run_benchmarks.results.store.schema import row_from_document
from run_benchmarks.results.store.store import ResultStore

from .conftest import ROOT
from .postgres_stores import fetch, pg  # noqa: F401 - pg: the fixture
from .test_finetune_table import TP2, ZERO2, doc as finetune_doc
from .test_importers import mlperf_log
from .test_loss_reference import CASE as LOSS_CASE, curve, document as loss_doc, spec
from .test_ppo_phases import ppo_document
from .test_results import document, fill

RUNS = ("run-a", "run-b", "run-ppo", "sweep-1", "seed1", "seed2", "seed3", "imp-mlperf")


def sqlite_rows(db: Path, table: str) -> list[dict]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(f"SELECT * FROM {table} ORDER BY {'id' if table == 'attempts' else 'run_id'}")]
    finally:
        conn.close()


@pytest.fixture
def lite(accelbench, tmp_path) -> Path:
    """An SQLite store as a team's would be: finetune runs, a PPO run, the points of a sweep (a batch-size axis),
    three seeds of a loss curve and an imported MLPerf log."""
    db = tmp_path / "lite" / "results.db"
    fill(db, [finetune_doc("run-a", "llama_tiny_lora", "torch", 1, 0.5), finetune_doc("run-a", "llama_tiny_lora", "paddle", 1, 0.25),
              finetune_doc("run-a", "llama_tiny_sft", "paddle", 2, 0.375, sets=TP2),
              finetune_doc("run-a", "llama_tiny_sft", "torch", 2, None, sets=ZERO2, status="oom"),
              finetune_doc("run-b", "llama_tiny_sft", "paddle", 2, 0.3, sets=TP2),
              ppo_document("run-ppo"), ppo_document("run-ppo", round_=2, scale=1.1)]
         + [document("sweep-1", "gpt2_tiny", "torch", 0.1 * b, round_=b) for b in (1, 2, 4)]
         + [loss_doc(f"seed{s}", curve(s), spec(s)) for s in (1, 2, 3)])
    log = tmp_path / "result_0.txt"
    log.write_text(mlperf_log("success"))
    done = accelbench("import", str(log), "--format", "mllog", "--case-name", "gpt3_13B:torch:A100:1:8", "--run-id",
                      "imp-mlperf", "--db", str(db))
    assert done.returncode == 0, done.stderr
    return db


def outputs(accelbench, db: str, root: Path, out: Path) -> dict[str, str]:
    """What each reading command prints of the store ``db``, its location replaced by STORE."""
    store = ["--db", db, "--root", str(root)]
    commands = {
        "runs": ("runs",), "show": ("show", "run-ppo"), "report json": ("report", *RUNS, "--format", "json"),
        "report markdown": ("report", "run-a", "run-b", "run-ppo", "--format", "markdown"),
        "compare": ("compare", "framework=torch", "framework=paddle"), "table": ("table", "finetune", "run-a", "run-b"),
        "reference": ("reference", "record", "seed1", "seed2", "seed3", "--dry-run"),
    }
    said = {}
    for name, argv in commands.items():
        done = accelbench(*argv, *store)
        assert done.returncode == 0, f"{name}: {done.stderr}"
        said[name] = done.stdout.replace(db, "STORE")
    said["runs"] = " ".join(said["runs"].replace("─", "").replace("━", "").split())  # a title's width sets the table's
    return said


def test_store_copy_keeps_every_row_and_every_command_reads_the_copy_as_the_original(accelbench, lite, pg, postgres,
                                                                                     root, tmp_path):
    count = len(sqlite_rows(lite, "attempts"))
    assert count == 14
    copied = accelbench("store", "copy", str(lite), pg.url)
    assert copied.returncode == 0, copied.stderr
    assert f"copied {len(RUNS)} run(s) with {count} attempt(s) from {lite} to {pg.url}" in copied.stdout
    for table in ("runs", "attempts"):  # as stored: ids, run ids, row versions, JSON text, log references
        key = "id" if table == "attempts" else "run_id"
        assert fetch(pg, f"SELECT * FROM {table} ORDER BY {key}", postgres.password) == sqlite_rows(lite, table)
    assert outputs(accelbench, pg.url, root, tmp_path) == outputs(accelbench, str(lite), root, tmp_path)
    again = accelbench("store", "copy", str(lite), pg.url)  # cut short or run twice: nothing doubles
    assert again.returncode == 0 and "copied 0 run(s) with 0 attempt(s)" in again.stdout
    assert f"{len(RUNS)} run(s) that {pg.url} holds already were left as they are there" in again.stdout
    assert fetch(pg, "SELECT COUNT(*) AS n FROM attempts", postgres.password) == [{"n": count}]
    back = tmp_path / "back" / "results.db"  # and back into a file to take along
    returned = accelbench("store", "copy", pg.url, str(back))
    assert returned.returncode == 0, returned.stderr
    assert sqlite_rows(back, "attempts") == sqlite_rows(lite, "attempts")
    assert sqlite_rows(back, "runs") == sqlite_rows(lite, "runs")
    with ResultStore(pg) as server:  # a store copied into holds the next row after the copied ones
        server.begin_run("later", "2026-11-30T00:00:00+00:00", ["accelbench"], None, None)
        assert server.add_attempt(row_from_document(document("later", "gpt3_tiny", "torch", 0.5))) == count + 1


def test_store_copy_into_a_store_holding_other_runs_gives_clashing_attempts_new_ids(accelbench, lite, pg):
    fill(pg, [document("theirs", "gpt3_tiny", "torch", 0.5), document("theirs", "gpt3_tiny", "torch", 0.5, round_=2)])
    copied = accelbench("store", "copy", str(lite), pg.url)
    assert copied.returncode == 0, copied.stderr
    assert "the 14 copied attempt(s) got new ids, in their order" in copied.stdout
    with ResultStore(pg) as server:
        ids = [a["id"] for a in server.attempts()]
        assert len(ids) == 16 == len(set(ids)) and len(server.runs()) == len(RUNS) + 1
    refused = accelbench("store", "copy", pg.url, pg.url)
    assert refused.returncode == 2 and "the same store" in refused.stderr


_IMPORT = """
import sys
from run_benchmarks.cli.main import main
sys.exit(main(["import", sys.argv[1], "--db", sys.argv[2], "--log-root", sys.argv[3]]))
"""


def test_a_bundle_out_of_postgresql_imports_into_sqlite_identically_and_twice_into_postgresql_never_doubles(
        accelbench, pg, postgres, tmp_path):
    log = tmp_path / "vendor" / "workerlog.0"
    log.parent.mkdir()
    log.write_text("global_step: 10, loss: 5.1, interval_tokens_per_second_per_device: 1234.5\n")
    with ResultStore(pg) as store:
        store.begin_run("import-1", "2026-11-23T10:00:00+00:00", ["accelbench", "import", str(log)], None,
                        str(log.parent), source="import:paddlenlp/1")
        row = row_from_document(document("import-1", "gpt3_tiny", "paddle", 0.5))
        row.update(source="import:paddlenlp/1", results_path=str(log))
        store.add_attempt(row)
        store.end_run("import-1", "2026-11-23T10:01:00+00:00")
    bundle = tmp_path / "import-1.tar.gz"
    made = accelbench("bundle", "import-1", "--db", pg.url, "-o", str(bundle))
    assert made.returncode == 0, made.stderr
    lite = tmp_path / "b" / "results.db"
    done = accelbench("import", str(bundle), "--db", str(lite))
    assert done.returncode == 0, done.stderr
    with ResultStore(pg) as server, ResultStore(lite) as file:
        (before,), (after,) = [a.row for a in server.attempts()], [a.row for a in file.attempts()]
        assert file.run("import-1") == {**server.run("import-1"), "log_dir": after["results_path"].rsplit("/", 1)[0],
                                        "note": file.run("import-1")["note"]}
    copied = Path(after["results_path"])  # the log, copied under the new store's log root
    assert copied == lite.parent / "import-1" / "imported" / "1-workerlog.0" and copied.read_bytes() == log.read_bytes()
    assert after["record"] == {**before["record"], "results_path": str(copied)}
    drop = ("results_path", "record")
    assert {k: v for k, v in before.items() if k not in drop} == {k: v for k, v in after.items() if k not in drop}
    # Into a second PostgreSQL store from two machines at once (their own log roots), then once more: one run.
    other = postgres.database(f"bundle_twice_{os.getpid()}")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", _IMPORT, str(bundle), other, str(tmp_path / f"machine{i}")],
                              env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(2)]
    codes = sorted(proc.wait(timeout=120) for proc in procs)
    errors = "".join(proc.stderr.read() for proc in procs)
    assert codes == [0, 2] and "already holds run import-1; nothing was imported" in errors, errors
    again = accelbench("import", str(bundle), "--db", other, "--log-root", str(tmp_path / "machine3"))
    assert again.returncode == 2 and "already holds run import-1" in again.stderr
    with ResultStore(other) as store:
        assert len(store.attempts()) == 1 and len(store.runs()) == 1
    kept = [p for i in range(2) for p in (tmp_path / f"machine{i}").glob("import-1")]
    assert len(kept) == 1  # the refused import left no folder behind
