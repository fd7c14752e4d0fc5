"""``accelbench history``'s arguments, apart from arguments.py (which is at its length limit): stdlib only, like it."""
from __future__ import annotations

import argparse
from pathlib import Path

from run_benchmarks.cli.exit_codes import EXIT_CONTENDED, EXIT_NOTHING_CHECKED, EXIT_REGRESSION
from run_benchmarks.results.history.formats import HISTORY_FORMATS


def since_argument(text: str):
    """``history --since``: an ISO date or time (UTC where it names no zone), or a span back from now (30d, 12h, 2w)."""
    import re
    from datetime import datetime, timedelta, timezone

    span = re.fullmatch(r"\s*(\d+)\s*([hdw])\s*", text)
    if span:
        return datetime.now(timezone.utc) - timedelta(hours=int(span.group(1)) * {"h": 1, "d": 24, "w": 168}[span.group(2)])
    try:
        at = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither a date (2026-11-01, 2026-11-01T12:00) nor a span "
                                         "back from now (30d, 12h, 2w)") from None
    return at if at.tzinfo else at.replace(tzinfo=timezone.utc)


def positive_count(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more, e.g. --last 30")
    return int(text)


def add_history(sub) -> argparse.ArgumentParser:
    """The history command's arguments (its store options are added by arguments.py)."""
    history = sub.add_parser(
        "history", help="each workload's figures over time, its change points and outliers, and what changed",
        description="One point per run of each workload (its hash less debug.* settings), ordered by when the run "
                    "measured (an import: its log's own time); tokens/s per device, samples/s, step time, MFU, "
                    "memory, tokens per joule, loss at the end. Change points: ruptures' binary segmentation with "
                    "a threshold at a 1 % significance level, a shift holding 3 points or more; contended rounds "
                    "left out and named. README, \"History\".",
        epilog="SELECT: run ids (their workloads' whole history) and/or KEY=VALUE filters, as for report; default: "
               "every workload in the store. e.g. accelbench history case=gpt3_6.7B --since 90d --check")
    history.add_argument("select", nargs="*", metavar="SELECT")
    history.add_argument("--since", type=since_argument, metavar="WHEN",
                         help="only runs measured from WHEN: a date or time (2026-11-01), or 30d, 12h, 2w back")
    history.add_argument("--last", type=positive_count, metavar="N", help="only the newest N runs of each workload")
    history.add_argument("--format", choices=list(HISTORY_FORMATS), default="terminal")
    history.add_argument("-o", "--output", type=Path, help="write to this file instead of stdout")
    history.add_argument("--check", action="store_true",
                         help=f"exit {EXIT_REGRESSION} when a workload's newest change point is a regression beyond "
                              f"the noise, {EXIT_CONTENDED} when its newest run was contended (and no regression "
                              f"shows), {EXIT_NOTHING_CHECKED} when it has too few points (6), else 0")
    return history
