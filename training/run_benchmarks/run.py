#!/usr/bin/env python3
"""FlagPerf's ``run.py`` at FlagPerf's path: ``python3 run_benchmarks/run.py`` from ``training/`` (or ``python3
run.py`` here) runs every case of ``config/test_conf.py``'s ``CASES`` on the hosts of ``config/cluster_conf.py``.
Both files are read without running them; ``--dry-run`` plans every case and starts nothing, and every
``accelbench run`` option works. README, "FlagPerf's run.py", has each key's meaning. A script, not a module:
training/run_benchmarks/ is no package, and nothing imports it.
"""
import sys
from pathlib import Path

if __name__ == "__main__":
    # This checkout's code first, in place of this script's folder on sys.path (whose paddle/ folder would
    # otherwise stand where the paddle package is looked up).
    here = Path(__file__).resolve().parent
    if sys.path and Path(sys.path[0] or ".").resolve() == here:
        sys.path.pop(0)
    sys.path.insert(0, str(here.parents[1]))
    from run_benchmarks.cli.flagperf_run import main

    sys.exit(main(sys.argv[1:], here))
