#!/usr/bin/env python3
"""FlagPerf's ``start_paddle_task.py`` at FlagPerf's path: from ``training/run_benchmarks/``, FlagPerf's
GPT-3 Paddle guide runs ``python paddle/start_paddle_task.py --vendor nvidia --case_name ... --data_dir
./GPT-3-data ...``. A thin entry into ``start_task.py`` (the same options, README "FlagPerf's options"), for
Paddle cases only; relative paths resolve against the folder you stand in, as FlagPerf's do. A script, not a
module: training/run_benchmarks/ is no package, and nothing imports it.
"""
import sys
from pathlib import Path

if __name__ == "__main__":
    # This checkout's code first, in place of this script's own folder on sys.path.
    here, checkout = Path(__file__).resolve().parent, Path(__file__).resolve().parents[3]
    if sys.path and Path(sys.path[0] or ".").resolve() == here:
        sys.path.pop(0)
    sys.path.insert(0, str(checkout))
    import start_task

    sys.exit(start_task.main(framework="paddle"))
