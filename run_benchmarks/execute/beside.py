"""Another run started on this machine while this one runs: said on the terminal when it is seen (issue 43).

The later run says it of this one at its preflight (its workers are on the hosts); this one reads the store's
runs every POLL_S while a round waits on its nodes and says each run that started after it, once. The round's
record names them too when it ends (store/overlap.py).
"""
from __future__ import annotations

import sys
import time
from typing import Optional, Sequence

from run_benchmarks.results.store.store import ResultStore

POLL_S = 2.0  # how often the store is read: one SQLite query, beside rounds that poll their nodes every 0.5 s


class RunsBeside:
    def __init__(self, store: Optional[ResultStore], run_id: str, said: Sequence[str], reporter: object):
        self.store, self.run_id, self.said, self.reporter = store, run_id, said, reporter
        self.seen: set[str] = set()
        self.last = 0.0

    def look(self, case_name: str, round_index: int) -> None:
        """Say each run started beside this one since the last look (at most every POLL_S)."""
        if self.store is None or time.monotonic() - self.last < POLL_S:
            return
        self.last = time.monotonic()
        for other in self.store.started_beside(self.run_id):
            named = f"run {other['run_id']}" in " ".join(self.said)  # the preflight's warnings said it already
            if other["run_id"] in self.seen or named:
                continue
            self.seen.add(other["run_id"])
            self.say(f"another run, {other['run_id']}, started on this machine at {other['started_at']} "
                     f"(orchestrator pid {other['orchestrator_pid']}) while round {round_index} of {case_name} runs: "
                     "figures from now on may be low where they share cores or devices")

    def say(self, text: str) -> None:
        notice = getattr(self.reporter, "notice", None)  # a reporter without one (a sweep's): stderr as it is
        if notice is not None:
            notice(text)
        else:
            print(f"accelbench: warning: {text}", file=sys.stderr, flush=True)
