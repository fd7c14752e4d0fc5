"""Recovery for the results store: runs whose orchestrator died are finalized (``killed``) with the attempts
their results.json files hold, and ``accelbench store repair`` adds what the store lacks (a part of
``ResultStore``: the mixin it inherits). Never twice: an
attempt counts as stored by its path, or by its case, round and timing.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path
from datetime import datetime, timezone
from typing import Any, Iterable, Iterator, Optional, Sequence

from pydantic import ValidationError

from run_benchmarks.results.rounds.record import RESULTS_SCHEMA, RoundRecord, Status
from run_benchmarks.results.store.clock import FINALIZE_WAIT_S, WAIT_ENV, now
from run_benchmarks.results.store.faults import StoreError, StoreUnavailable, process_alive
from run_benchmarks.results.store.schema import _insert_attempt


def summary_state(folder: Optional[Path], run_id: str) -> tuple[str, str]:
    """What the run folder's summary.json says of the run's end: ``("ended", "")`` when it holds this run's
    summary (the run ended by itself: ``done``); ``("unreadable", why)`` when it is there but empty, cut
    short or someone else's: the run reached its end and could not write it (a full disk: ``aborted``), and
    it never reads as a finished run; ``("absent", "")`` when there is none (the run died before its end)."""
    path = folder / "summary.json" if folder else None
    if path is None or not (path.is_file() or path.is_symlink()):
        return "absent", ""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        return "unreadable", f"its summary.json cannot be read ({exc})"
    if not text.strip():
        return "unreadable", f"its summary.json is empty ({len(text.encode())} bytes)"
    try:
        doc = json.loads(text)
    except ValueError as exc:
        return "unreadable", f"its summary.json is not whole JSON ({exc})"
    if not isinstance(doc, dict) or not isinstance(doc.get("rounds"), list):
        return "unreadable", "its summary.json is not a run summary (no list of rounds)"
    if doc.get("run_id") != run_id:
        return "unreadable", f"its summary.json is the summary of another run ({doc.get('run_id')!r})"
    return "ended", ""


_ENDINGS = {
    "ended": ("done", "it wrote its summary.json, so it ended, but its end never reached the store"),
    "unreadable": ("aborted", "{why}: it stopped without writing its results whole (a full disk?), and its end "
                              "never reached the store"),
}


FULL_BELOW_BYTES = 1 << 20  # a run starts with 1 GiB free (preflight): this little left means the disk filled


def _free_bytes(folder: Optional[Path]) -> Optional[int]:
    """Free bytes of the file system holding ``folder`` (None when there is no folder to look at): a run
    stopped by a full disk (summary.json, its end in the store) could write neither, so a full disk is what
    tells it from a killed run."""
    if folder is None or not folder.is_dir():
        return None
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def _newest_mtime(folder: Path) -> Optional[str]:
    try:
        newest = max((p.stat().st_mtime for p in folder.rglob("*") if p.is_file()), default=None)
    except OSError:
        return None
    return None if newest is None else datetime.fromtimestamp(newest, timezone.utc).isoformat(timespec="seconds")


def _attempt_of(path: Path) -> tuple[int, Optional[str]]:
    """(attempt number, status override) from where a results.json lies: ``round<k>.start-error<n>/`` holds
    attempt n, stored as start_error; ``round<k>/`` the attempt after its start errors."""
    name = path.parent.name
    if ".start-error" in name:
        number = name.rsplit(".start-error", 1)[1]
        return (int(number) if number.isdigit() else 1), "start_error"
    return 1 + len(list(path.parent.parent.glob(f"{name}.start-error*/results.json"))), None


def _run_dir(path: Path) -> Optional[Path]:
    """logs/<run_id>/<case>/round<k>/results.json -> logs/<run_id>"""
    return path.parent.parent.parent if len(path.parents) >= 3 else None


def results_documents(folder: Path, unreadable: Optional[list] = None) -> Iterator[tuple[Path, dict]]:
    """(path, document) for every round results.json under ``folder`` (or ``folder`` itself if it is one),
    in path order; ``unreadable`` collects (path, why) for the ones that cannot be read."""
    folder = Path(folder).resolve()
    paths = [folder] if folder.is_file() else sorted(folder.rglob("results.json"))
    for path in paths:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            if unreadable is not None:
                unreadable.append((path, f"cannot be read: {exc}"))
            continue
        if not isinstance(doc, dict) or doc.get("schema") != RESULTS_SCHEMA or "run_id" not in doc:
            if unreadable is not None:
                unreadable.append((path, f"not an accelbench round document ({RESULTS_SCHEMA})"))
            continue
        try:
            RoundRecord.model_validate(doc)
        except ValidationError as exc:
            if unreadable is not None:
                first = exc.errors()[0]
                where = ".".join(str(part) for part in first["loc"])
                unreadable.append((path, f"not a valid round record: {where}: {first['msg']}"))
            continue
        yield path, doc


class StoreRecovery:
    """Finalizing and repairing, for ``ResultStore`` (which provides ``conn``, ``wait_s`` and ``_write``)."""

    def finalize_dead_runs(self) -> list[str]:
        """Runs still ``running`` whose orchestrator on this host is gone: their results.json files not yet in
        the store are added and the run is marked ``killed`` (``done`` if it wrote its summary.json, ``aborted``
        if that summary.json is empty or unreadable, see summary_state)."""
        host = socket.gethostname()
        rows = self.conn.execute("SELECT run_id, orchestrator_pid, orchestrator_started, log_dir FROM runs "
                                 "WHERE status = 'running' AND orchestrator_host = ? AND orchestrator_pid IS NOT NULL",
                                 (host,)).fetchall()
        notes = []
        for row in rows:
            if process_alive(row["orchestrator_pid"], row["orchestrator_started"]):
                continue
            try:
                note = self._write(lambda cur, r=row: self._finalize(cur, r["run_id"], r["log_dir"], "killed"),
                                   FINALIZE_WAIT_S, WAIT_ENV, f"the end of run {row['run_id']}")
            except (StoreUnavailable, StoreError) as exc:
                self.announce(f"run {row['run_id']} lost its orchestrator but could not be finalized now "
                              f"({str(exc).splitlines()[0]}); the next open of the store will")
                continue
            if note:
                notes.append(note)
                self.announce(note)
        self.finalized += notes
        return notes

    def _finalize(self, cur: Any, run_id: str, log_dir: Optional[str], status: str) -> Optional[str]:
        """Inside a write transaction: the run's missing attempts from its results.json files, then its end."""
        row = cur.execute("SELECT status, orchestrator_host, orchestrator_pid FROM runs WHERE run_id = ?",
                          (run_id,)).fetchone()
        if row is None or row["status"] != "running":
            return None  # another process finalized it first
        folder = Path(log_dir) if log_dir else None
        added = self.add_missing(cur, run_id, results_documents(folder) if folder and folder.is_dir() else [],
                                  "the run's orchestrator had died before storing it")
        state, detail = summary_state(folder, run_id)
        free = _free_bytes(folder) if state == "absent" else None
        if free is not None and free < FULL_BELOW_BYTES:
            state, detail = "unreadable", f"it has no summary.json and its file system is full ({free} bytes free)"
        final, why = _ENDINGS.get(state, (status, "it died without ending the run (SIGKILL, a crash, a reboot)"))
        why = why.format(why=detail)
        last = _newest_mtime(folder) if folder and folder.is_dir() else None
        note = (f"run {run_id}: marked {final} — its orchestrator (pid {row['orchestrator_pid']} on "
                f"{row['orchestrator_host']}) is gone and {why}; {added} attempt(s) added from its results.json "
                f"files; checked at {now()} by pid {os.getpid()}")
        cur.execute("UPDATE runs SET status = ?, ended_at = COALESCE(ended_at, ?), note = ? WHERE run_id = ?",
                    (final, last, note, run_id))
        return note

    def add_missing(self, cur: Any, run_id: str, documents: Iterable[tuple[Path, dict]],
                     why: str) -> int:
        """Rows for the run's documents the store does not hold yet (matched by path or by case, round and
        timing, so a moved log folder is no reason for a second row)."""
        stored = cur.execute("SELECT case_name, round, started_at, wall_time_s, results_path FROM attempts "
                             "WHERE run_id = ?", (run_id,)).fetchall()
        paths = {r["results_path"] for r in stored if r["results_path"]}
        keys = {(r["case_name"], r["round"], r["started_at"], r["wall_time_s"]) for r in stored}
        added = 0
        for path, doc in documents:
            if doc.get("run_id") != run_id:
                continue
            key = (doc.get("case_name"), doc.get("round"), doc.get("started_at"), doc.get("wall_time_s"))
            if str(path) in paths or key in keys:
                continue
            attempt, status = _attempt_of(path)
            record = RoundRecord.model_validate(doc)
            record = record.model_copy(update={
                "results_path": str(path), **({"status": Status(status)} if status else {}),
                "warnings": [*record.warnings, f"added to the store from {path} at {now()}: {why}"]})
            cur.execute(*_insert_attempt(record.to_row(attempt)))
            paths.add(str(path))
            keys.add(key)
            added += 1
        return added

    def repair(self, folders: Sequence[Path]) -> list[str]:
        """Add every attempt whose results.json (under ``folders``) the store lacks; a run the store does not
        know gets its row back. Runs whose orchestrator may still be writing are left alone. Idempotent."""
        self.finalize_dead_runs()
        by_run: dict[str, list[tuple[Path, dict]]] = {}
        unreadable = []
        for folder in folders:
            for path, doc in results_documents(folder, unreadable):
                by_run.setdefault(doc["run_id"], []).append((path, doc))
        lines = [f"skipped {p}: {why}" for p, why in unreadable]
        host = socket.gethostname()
        for run_id, documents in sorted(by_run.items()):
            row = self.conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is not None and row["status"] == "running":
                if row["orchestrator_pid"] is None:
                    lines.append(f"run {run_id}: left alone — marked running by an accelbench that did not record "
                                 "its process, so whether it still writes cannot be told")
                    continue
                if row["orchestrator_host"] != host:
                    lines.append(f"run {run_id}: left alone — its orchestrator runs on {row['orchestrator_host']}, "
                                 "not this host; repair it there")
                    continue
                lines.append(f"run {run_id}: left alone — its orchestrator (pid {row['orchestrator_pid']}) is "
                             "still running and stores its own attempts")
                continue

            def work(cur: Any, run_id=run_id, documents=documents) -> str:
                # asked again under the write lock: another repair may have rebuilt the run meanwhile
                known = cur.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is not None
                if not known:
                    self._recreate_run(cur, run_id, documents)
                added = self.add_missing(cur, run_id, documents, "repaired with accelbench store repair")
                return (f"run {run_id}: " + ("" if known else "run row rebuilt; ")
                        + f"{added} attempt(s) added, {len(documents) - added} already stored")
            lines.append(self._write(work, self.wait_s, WAIT_ENV, f"the attempts of run {run_id}"))
        if not by_run:
            lines.append(f"no results.json under {', '.join(map(str, folders))}")
        return lines

    def _recreate_run(self, cur: Any, run_id: str, documents: list[tuple[Path, dict]]) -> None:
        run_dir = _run_dir(documents[0][0])
        starts = sorted(d.get("started_at") or "" for _, d in documents if d.get("started_at"))
        ends = sorted(d.get("ended_at") or "" for _, d in documents if d.get("ended_at"))
        state, detail = summary_state(run_dir, run_id)
        status = {"ended": "done", "unreadable": "aborted"}.get(state, "killed")
        ending = {"ended": "", "unreadable": f"; {detail}: the run could not write its results whole (a full disk?)"}
        env = (documents[0][1].get("environment") or {}).get("orchestrator") or {}
        cur.execute("INSERT INTO runs (run_id, started_at, ended_at, status, argv, accelbench_commit, log_dir, "
                    "source, orchestrator_host, note) VALUES (?, ?, ?, ?, ?, ?, ?, 'accelbench', ?, ?)",
                    (run_id, starts[0] if starts else now(), ends[-1] if ends else None,
                     status, json.dumps(env.get("argv")) if env.get("argv") else None,
                     env.get("accelbench_commit"), str(run_dir) if run_dir else None, env.get("orchestrator_host"),
                     f"run row rebuilt from results.json by accelbench store repair at {now()}"
                     + ending.get(state, "; no summary.json: the run did not end by itself")))
