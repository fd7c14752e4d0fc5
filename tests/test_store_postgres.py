"""The results store on PostgreSQL (a private server, tests/infra/postgres.py): the same rows as SQLite's, many
writers at once, a server restarted between writes, a server down during a write, logins and secrets.
Store-level and CLI in-process; the runs are synthetic rows (test_results.document). Real runs against the
server: test_store_postgres_runs.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from run_benchmarks.results.rounds.record import RESULTS_SCHEMA
from run_benchmarks.results.store import location
from run_benchmarks.results.store.faults import StoreUnavailable
from run_benchmarks.results.store.schema import ROW_VERSION, row_from_document
from run_benchmarks.results.store.store import ResultStore

from .conftest import ROOT
from .postgres_stores import every_text, fetch, pg  # noqa: F401 - pg: the fixture
from .test_results import document, fill


def docs(run_id: str, rounds: int = 2) -> list[dict]:
    return [document(run_id, "gpt3_tiny", "torch", 0.5 + r / 10, round_=r) for r in range(1, rounds + 1)]


def without_ids(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if k != "id"} for row in rows]


def test_the_same_rows_read_back_the_same_from_either_engine(pg, tmp_path):
    written = docs("r1") + docs("r2", 1) + [document("r2", "gpt3_tiny", "paddle", 0.7, status="failed", round_=2)]
    fill(tmp_path / "results.db", written)
    fill(pg, written)
    with ResultStore(tmp_path / "results.db") as lite, ResultStore(pg) as server:
        assert [a.row for a in server.attempts()] == [a.row for a in lite.attempts()]
        assert server.runs() == lite.runs()
        assert server.attempts({"framework": "paddle", "nnodes": 1})[0]["status"] == "failed"
        assert server.resolve_run("r2") == "r2" and server.resolve_run("last") == lite.resolve_run("last")
        assert [a.version for a in server.attempts()] == [ROW_VERSION] * 4
        # a sweep resumed begins its run again: the same row, running again (an upsert on either engine)
        for store in (lite, server):
            store.begin_run("r1", "2026-11-24T00:00:00+00:00", ["accelbench", "sweep"], "abc", "/logs")
        assert server.run("r1") == lite.run("r1") and server.run("r1")["status"] == "running"


_WRITER = """
import sys
from pathlib import Path
from run_benchmarks.results.rounds.record import RESULTS_SCHEMA
from run_benchmarks.results.store import location
from run_benchmarks.results.store.schema import ROW_VERSION, row_from_document
from run_benchmarks.results.store.store import ResultStore
from tests.test_results import document

url, run_id, rounds, folder = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
with ResultStore(location.parse(url)) as store:
    store.begin_run(run_id, "2026-11-23T10:00:00+00:00", ["accelbench"], "abc", str(folder))
    for r in range(1, rounds + 1):
        store.add_attempt(row_from_document(document(run_id, "gpt3_tiny", "torch", 0.5, round_=r % 9 + 1)))
    store.end_run(run_id, "2026-11-23T11:00:00+00:00")
    print("\\n".join(store.repair([folder])))
"""


def test_writers_on_many_processes_at_once_all_land_and_racing_repairs_add_each_round_once(pg, postgres, tmp_path):
    """Four processes open a new store at once (each makes the tables if missing), write 15 attempts each,
    then all repair one folder of results.json files the store lacks: every attempt lands, each once."""
    folder = tmp_path / "logs" / "lost"
    for r in range(1, 4):
        path = folder / "gpt3_tiny" / f"round{r}" / "results.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({**document("lost", "gpt3_tiny", "torch", 0.5, round_=r), "schema":
                                    RESULTS_SCHEMA, "results_path": str(path)}))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, pg.url, f"w{i}", "15", str(folder)], env=env,
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(4)]
    outs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * 4, [err[-2000:] for _, err in outs]
    counts = fetch(pg, "SELECT run_id, COUNT(*) AS n FROM attempts GROUP BY run_id ORDER BY run_id", postgres.password)
    assert counts == [{"run_id": "lost", "n": 3}] + [{"run_id": f"w{i}", "n": 15} for i in range(4)]
    added = [line for out, _ in outs for line in out.splitlines() if line.startswith("run lost:")]
    assert sorted(added)[-1] == "run lost: run row rebuilt; 3 attempt(s) added, 0 already stored", added
    assert sum("3 already stored" in line for line in added) == 3


def test_a_server_restarted_between_writes_is_reconnected_and_both_rounds_land(pg, postgres):
    with ResultStore(pg) as store:
        store.begin_run("r1", "2026-11-23T10:00:00+00:00", ["accelbench"], "abc", "/logs")
        store.add_attempt(row_from_document(docs("r1")[0]))
        postgres.stop()
        postgres.start()  # every session the server had is gone
        store.add_attempt(row_from_document(docs("r1")[1]))
        store.end_run("r1", "2026-11-23T11:00:00+00:00")
        assert [(a["round"], a["status"]) for a in store.attempts()] == [(1, "ok"), (2, "ok")]
        assert store.run("r1")["status"] == "done" and store.unstored == []


def test_a_server_down_during_a_write_gives_up_within_its_budget_naming_the_url(pg, postgres, accelbench, tmp_path):
    notes = []
    store = ResultStore(pg, retry_s=1.5, announce=notes.append)
    store.begin_run("r1", "2026-11-23T10:00:00+00:00", ["accelbench"], "abc", "/logs")
    with postgres.down():
        began = time.monotonic()
        with pytest.raises(StoreUnavailable) as caught:
            store.add_attempt(row_from_document(docs("r1")[0]), what="round 1 of gpt3_tiny")
        assert time.monotonic() - began < 15
        refused = accelbench("runs", "--db", pg.url)  # opening while it is down: refused, the URL named
    store.close()
    assert f"the results store {pg.url} could not be reached for 1.5 s, so round 1 of gpt3_tiny" in str(caught.value)
    assert caught.value.reason == "the database server could not be reached for 1.5 s"
    assert "accelbench store repair --db" in caught.value.fix
    assert notes and "cannot be reached" in notes[0] and "retrying round 1 of gpt3_tiny for up to 1.5 s" in notes[0]
    assert refused.returncode == 2 and f"the results store {pg.url} cannot be reached" in refused.stderr
    assert "pg_isready" in refused.stderr and "Traceback" not in refused.stderr
    with ResultStore(pg) as back:  # the server is back: the store works as before
        assert back.attempts() == [] and back.run("r1")["status"] == "running"


def test_the_password_comes_from_pgpassword_or_pgpass_never_the_url_and_no_row_holds_it(
        pg, postgres, accelbench, tmp_path, monkeypatch):
    with_password = pg.url.replace("bench@", f"bench:{postgres.password}@")
    refused = accelbench("runs", "--db", with_password)
    assert refused.returncode == 2 and "holds a password" in refused.stderr and "PGPASSWORD" in refused.stderr
    assert postgres.password not in refused.stdout + refused.stderr
    in_query = accelbench("runs", "--db", pg.url + f"?password={postgres.password}")
    assert in_query.returncode == 2 and "'password' parameter" in in_query.stderr
    assert postgres.password not in in_query.stderr
    monkeypatch.delenv("PGPASSWORD")
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "nowhere"))
    no_password = accelbench("runs", "--db", pg.url)
    assert no_password.returncode == 2 and f"the results store {pg.url} refused the login" in no_password.stderr
    assert "PGPASSWORD" in no_password.stderr and "~/.pgpass" in no_password.stderr
    pgpass = tmp_path / "pgpass"
    pgpass.write_text(f"127.0.0.1:*:*:bench:{postgres.password}\n")
    pgpass.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(pgpass))
    fill(pg, docs("r1"))
    assert postgres.password not in every_text(pg, postgres.password)
    listed = accelbench("runs", "--db", pg.url)
    assert listed.returncode == 0 and "r1" in listed.stdout, listed.stderr


@pytest.mark.parametrize("given, said", [
    ("mysql://bench@127.0.0.1/results", "cannot store results through mysql://"),
    ("postgresql+psycopg://bench@h/db", "cannot store results through postgresql+psycopg://"),
    ("postgresql:/bench@127.0.0.1:5432/db", "looks like a URL missing a slash"),
    ("sqlite://", "names no file"),
])
def test_a_url_accelbench_cannot_serve_is_refused_naming_the_schemes_it_can(accelbench, tmp_path, given, said):
    for argv in (("runs", "--db", given), ("run", "gpt2_tiny:torch:cpu:1:1", "--dry-run", "--db", given)):
        refused = accelbench(*argv)
        assert refused.returncode == 2, refused.stderr
        assert said in refused.stderr and "postgresql://USER@HOST:PORT/DATABASE" in refused.stderr
        assert "sqlite:///PATH" in refused.stderr and "Traceback" not in refused.stderr
    assert not list(tmp_path.glob("postgres*")) and not list(tmp_path.glob("mysql*"))


def test_a_postgresql_url_is_no_longer_taken_as_a_file_name(accelbench, tmp_path):
    """Before, the runs "succeeded" into a file postgresql:/bench@... under the current folder."""
    down = accelbench("runs", "--db", "postgresql://bench@127.0.0.1:9/results")  # port 9: nothing listens
    assert down.returncode == 2 and "the results store postgresql://bench@127.0.0.1:9/results cannot be " \
                                    "reached" in down.stderr, down.stderr
    assert not (tmp_path / "postgresql:").exists() and list(tmp_path.iterdir()) == [accelbench.system_tmp]


def test_sqlite_urls_and_test_conf_db_name_the_store(accelbench, root, tmp_path):
    fill(tmp_path / "a.db", docs("r1"))
    assert location.parse("sqlite:///a.db", base=tmp_path).path == tmp_path / "a.db"
    assert location.parse(f"sqlite:///{tmp_path}/a.db").path == tmp_path / "a.db"
    listed = accelbench("runs", "--db", f"sqlite:///{tmp_path}/a.db")
    assert listed.returncode == 0 and "r1" in listed.stdout, listed.stderr
    conf = root / "configs" / "test_conf.yaml"
    conf.write_text(conf.read_text() + f"db: {tmp_path}/a.db\n")
    assert "r1" in accelbench("runs", "--root", str(root)).stdout
    conf.write_text(conf.read_text().replace(f"db: {tmp_path}/a.db", "db: postgresql://bench:pw@h/db"))
    bad = accelbench("runs", "--root", str(root))
    assert bad.returncode == 2 and f"{conf}: db:" in bad.stderr and "holds a password" in bad.stderr
    assert ":pw@" not in bad.stderr


def test_only_the_store_talks_to_the_database():
    """No module outside run_benchmarks/results/store/ imports sqlite3 or psycopg (lazy imports included): the
    rest catches the store's own errors (faults.StoreError, StoreUnavailable)."""
    import ast

    found = []
    for path in sorted((ROOT / "run_benchmarks").rglob("*.py")):
        if path.parent == ROOT / "run_benchmarks" / "results" / "store":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in ("sqlite3", "psycopg")]
    assert found == []


def test_without_the_driver_a_postgresql_store_names_the_extra_to_install(accelbench, monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as where the postgres extra is not installed
    done = accelbench("runs", "--db", "postgresql://bench@127.0.0.1:9/results")
    assert done.returncode == 2 and "needs the psycopg driver" in done.stderr
    assert "pip install 'accelbench[postgres]'" in done.stderr and "Traceback" not in done.stderr
