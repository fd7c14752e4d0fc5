"""Which other accelbench runs ran on this machine while an attempt ran: a warning on the attempt, since figures
are low where two runs shared cores or devices. How the run that started first learns of the second: when its
round ends, the second's row is in the store."""
from __future__ import annotations

import json
import re
from typing import Any

from run_benchmarks.results.store.clock import instant
from run_benchmarks.results.store.faults import StoreError, process_alive


def overlapping_runs(conn: Any, fields: dict) -> list[str]:
    """A warning for each other accelbench run whose orchestrator ran on this machine while the attempt
    ran (its run row from before the attempt's end to after its start; still running counts), unless the
    attempt's warnings name that run already (the run that started second finds the first one's workers
    at preflight) or the two ran their nodes on different hosts. This is how the run that started first
    learns of the second: when its round ends, the second's row is in the store."""
    started, ended = instant(fields.get("started_at")), instant(fields.get("ended_at"))
    if started is None or ended is None:
        return []
    try:
        own = conn.execute("SELECT orchestrator_host FROM runs WHERE run_id = ? AND source = 'accelbench'",
                                (fields.get("run_id"),)).fetchone()
        if own is None or not own["orchestrator_host"]:
            return []
        host = own["orchestrator_host"]
        others = conn.execute(
            "SELECT run_id, started_at, ended_at, status, orchestrator_pid, orchestrator_started FROM runs "
            "WHERE run_id != ? AND orchestrator_host = ? AND source = 'accelbench' ORDER BY started_at",
            (fields.get("run_id"), host)).fetchall()
    except StoreError:
        return []  # a courtesy: never a reason to lose the attempt
    said = " ".join(fields.get("warnings") or [])
    nodes = _node_hosts(fields.get("environment"))
    lines = []
    for other in others:
        begun, over = instant(other["started_at"]), instant(other["ended_at"])
        if begun is None or begun >= ended or re.search(rf"\brun {re.escape(other['run_id'])}(?![\w.-])", said):
            continue  # began after the attempt ended, or named already
        if over is not None:
            if over <= started:
                continue  # ended before the attempt began
        elif (other["status"] != "running"
              or not process_alive(other["orchestrator_pid"], other["orchestrator_started"])):
            if begun < started:
                continue  # ended, when is not known: it counts only when it began during the attempt
        theirs = _run_node_hosts(conn, other["run_id"])
        if nodes and theirs and not nodes & theirs:
            continue  # both placed their nodes, on different hosts
        lines.append(f"another run, {other['run_id']}, ran on this machine ({host}) during this attempt "
                     f"({other['started_at']} -> {other['ended_at'] or other['status']}, orchestrator pid "
                     f"{other['orchestrator_pid']}): figures may be low where they shared cores or devices")
    return lines

def _run_node_hosts(conn: Any, run_id: str) -> set[str]:
    hosts: set[str] = set()
    for row in conn.execute("SELECT environment FROM attempts WHERE run_id = ?", (run_id,)):
        try:
            hosts |= _node_hosts(json.loads(row[0]) if row[0] else None)
        except ValueError:
            continue
    return hosts


def _node_hosts(environment: Any) -> set[str]:
    nodes = environment.get("nodes") if isinstance(environment, dict) else None
    return {str(n["host"]) for n in nodes or () if isinstance(n, dict) and n.get("host")}


def started_beside(conn: Any, run_id: str) -> list:
    """The other accelbench runs whose orchestrator on this run's machine started after this run did (as the
    store knows them now): what the run that started first says live, as its rounds run (execute/rounds.py)."""
    try:
        own = conn.execute("SELECT orchestrator_host, started_at FROM runs WHERE run_id = ? AND source = "
                           "'accelbench'", (run_id,)).fetchone()
        if own is None or not own["orchestrator_host"]:
            return []
        return conn.execute("SELECT run_id, started_at, orchestrator_pid FROM runs WHERE run_id != ? AND "
                            "orchestrator_host = ? AND source = 'accelbench' AND started_at >= ? ORDER BY started_at",
                            (run_id, own["orchestrator_host"], own["started_at"])).fetchall()
    except StoreError:
        return []  # a courtesy: never a reason to stop a round
