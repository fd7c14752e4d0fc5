"""The single entry of a worker process: ``python -m training.run_pretraining --config FILE``.

Started by the framework's own launcher (torchrun, paddle.distributed.launch),
one process per device, with the resolved ``WorkerConfig`` the orchestrator
wrote for this round; ``training/contract/names.py`` names this module and its exit
codes for the orchestrator.
"""
from __future__ import annotations

import argparse
import gc
import os
import sys

if __name__ == "__main__":  # as the process's entry only: a process that imports this module keeps its collector
    gc.disable()  # until the first measured step (training/collector.py), before any import below

if not __package__:  # run as a file: training/ on sys.path would shadow the real torch with training/torch
    # Python puts the script's real folder on sys.path (symlinks resolved), so compare real paths; the
    # code root is the one the path names (a symlinked training/ in a checkout copy stays that copy's).
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != os.path.realpath(here)]
    sys.path.insert(0, os.path.dirname(here))

from training.contract import names as contract, perflog  # noqa: E402
from training.contract.spec import WorkerConfig  # noqa: E402
from training import workers  # noqa: E402
from training.unsupported import UnsupportedOnDevice  # noqa: E402


def load_config(path: str) -> WorkerConfig:
    with open(path, encoding="utf-8") as f:
        return WorkerConfig.model_validate_json(f.read())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", required=True, help="resolved worker config (JSON) written by accelbench")
    args = parser.parse_args(argv)
    cfg = load_config(args.config)
    try:
        workers.run(cfg)  # the framework's entry for the task (training/workers.py)
    except UnsupportedOnDevice as exc:
        # The record is what the orchestrator reads (the round is ``unsupported``, not ``failed``); the line
        # on stderr is for whoever reads the log.
        perflog.emit(perflog.UnsupportedRecord(rank=exc.rank or 0, reason=str(exc)))
        print(f"accelbench: not supported on this device: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(contract.EXIT_UNSUPPORTED) from None


if __name__ == "__main__":
    main()
