"""``accelbench store copy FROM TO``: every run and attempt of one store into another, either engine to either
(a team's SQLite files into its PostgreSQL database, or a database back into a file to take along).

Rows are copied as stored, not re-derived: the same run ids, attempt ids (unless the target holds attempts of
the same ids already: then every copied attempt gets a new id, in their order, which is said), row versions, JSON columns and log references (a run's ``log_dir``, an
attempt's ``results_path``); the log folders themselves stay where they are. Each run is copied in one write
transaction with its attempts, and a run the target holds already is left as it is there, so a copy that was
cut short is run again to finish it and never doubles a row. The source is only read."""
from __future__ import annotations

from typing import Any

from run_benchmarks.errors import UserError
from run_benchmarks.results.store.clock import WAIT_ENV
from run_benchmarks.results.store.connection import Connection
from run_benchmarks.results.store.faults import StoreError
from run_benchmarks.results.store.store import ResultStore


def _insert(conn: Connection, table: str, row: dict) -> None:
    columns = ", ".join(f'"{c}"' for c in row)
    conn.execute(f"INSERT INTO {table} ({columns}) VALUES ({', '.join('?' for _ in row)})", list(row.values()))


def copy_store(source: ResultStore, target: ResultStore) -> list[str]:
    """Copy what ``target`` lacks; the lines say what was copied, left and renumbered."""
    if source.where == target.where:
        raise UserError(f"store copy: FROM and TO are the same store ({source.where})", "name two stores")
    missing = source.columns("attempts") - target.columns("attempts")
    if missing:
        raise UserError(f"store copy: {target.where} lacks the columns {', '.join(sorted(missing))} of {source.where}",
                        "upgrade the accelbench that made the target, or copy into a new store")
    run_columns = sorted(source.columns("runs") & target.columns("runs"))
    attempt_columns = sorted(source.columns("attempts"))
    taken = {row[0] for row in target.conn.execute("SELECT id FROM attempts")}
    keep_ids = not taken & {row[0] for row in source.conn.execute("SELECT id FROM attempts")}
    runs = source.conn.execute(f"SELECT {', '.join(run_columns)} FROM runs ORDER BY started_at, run_id").fetchall()
    copied = attempts = kept = 0
    quoted = ", ".join(f'"{c}"' for c in attempt_columns)
    for run in runs:
        run_id = run["run_id"]
        rows = source.conn.execute(f"SELECT {quoted} FROM attempts WHERE run_id = ? ORDER BY id", (run_id,)).fetchall()

        def work(conn: Connection, run: Any = run, rows: list = rows) -> int:
            if conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run["run_id"],)).fetchone():
                return -1
            _insert(conn, "runs", {c: run[c] for c in run_columns})
            for row in rows:
                _insert(conn, "attempts", {c: row[c] for c in attempt_columns if keep_ids or c != "id"})
            if keep_ids and conn.dialect.after_explicit_ids:
                conn.execute(conn.dialect.after_explicit_ids)
            return len(rows)

        try:
            fresh = target._write(work, target.wait_s, WAIT_ENV, f"run {run_id}")
        except StoreError as exc:
            raise UserError(f"store copy: run {run_id} does not fit {target.where} ({str(exc)[:300]}); the runs "
                            f"before it are copied", "correct or delete that run in the source, then copy again "
                                                     "(runs already copied are left as they are)") from None
        if fresh < 0:
            kept += 1
            continue
        copied, attempts = copied + 1, attempts + fresh
    lines = [f"copied {copied} run(s) with {attempts} attempt(s) from {source.where} to {target.where}"]
    if kept:
        lines.append(f"{kept} run(s) that {target.where} holds already were left as they are there")
    if attempts and not keep_ids:
        lines.append(f"the {attempts} copied attempt(s) got new ids, in their order: {target.where} held attempts "
                     "of the same ids already")
    orphans = source.conn.execute("SELECT COUNT(*) FROM attempts WHERE run_id NOT IN (SELECT run_id FROM runs)"
                                  ).fetchone()[0]
    if orphans:
        lines.append(f"WARNING: {orphans} attempt(s) of {source.where} belong to no run row and were not copied: "
                     f"rebuild their runs first with accelbench store repair --db {source.where}")
    lines.append("the runs' log folders stay where they are (log_dir, results_path name them); copy them too "
                 "where the new store is read from another machine")
    return lines
