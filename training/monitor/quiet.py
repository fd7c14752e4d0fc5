"""``python -m training.monitor.quiet``: the contention counters of this machine over a few seconds, as JSON.

What ``run --require-quiet`` reads on each host before a round (run_benchmarks/execute/quiet.py): two samples of
the counters the node's monitor writes (contention.py), ``--seconds`` apart, on the cores this process may use.
No round runs then, so the run's own processes are this probe and the orchestrator (``--orchestrator``, its
``host:pid:start`` tag). ``--until-eof``: the second sample when stdin closes, what ``calibrate`` reads beside
its GEMM benchmark (started with the same ``ACCELBENCH_RUN_ID`` as this probe, so it counts as the run's own).
Standard library only.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from training.contract.names import ENV_ORCHESTRATOR
from training.monitor.contention import ContentionCounters


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.monitor.quiet")
    parser.add_argument("--seconds", type=float, default=2.0, help="how long to measure")
    parser.add_argument("--orchestrator", default="", help="the orchestrator's host:pid:start (its CPU is the run's)")
    parser.add_argument("--until-eof", action="store_true", help="the second sample when stdin closes")
    args = parser.parse_args(argv)
    counters = ContentionCounters(environ={**os.environ, ENV_ORCHESTRATOR: args.orchestrator})
    first = {"t": time.time(), "contention": counters.sample()}
    if args.until_eof:
        print("ready", flush=True)  # the baseline is taken: what is measured may start
        sys.stdin.read()
    else:
        time.sleep(max(0.1, args.seconds))
    last = {"t": time.time(), "contention": counters.sample()}
    print(json.dumps([first, last]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
