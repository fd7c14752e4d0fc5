"""The single entry of a worker process: ``python -m training.run_pretraining --config FILE``.

Started by the framework's own launcher (torchrun, paddle.distributed.launch),
one process per device, with the resolved ``WorkerConfig`` the orchestrator
wrote for this round; ``training/contract/names.py`` names this module and its exit
codes for the orchestrator.
"""
from __future__ import annotations

import argparse
import os
import sys

if not __package__:  # run as a file: training/ on sys.path would shadow the real torch with training/torch
    # Python puts the script's real folder on sys.path (symlinks resolved), so compare real paths; the
    # code root is the one the path names (a symlinked training/ in a checkout copy stays that copy's).
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != os.path.realpath(here)]
    sys.path.insert(0, os.path.dirname(here))

from training.contract import names as contract, perflog  # noqa: E402
from training.contract.spec import WorkerConfig  # noqa: E402
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
        micro = cfg.workload.task == "micro"  # a micro-benchmark case: figures, no training
        if cfg.runtime.framework == "torch":
            from torch.distributed.elastic.multiprocessing.errors import record
            if micro:
                from training.micro.case import run as entry
            else:
                from training.torch.train import train as entry

            record(entry)(cfg)  # under torchrun, a failure's traceback reaches the launcher's summary
        elif cfg.runtime.framework == "paddle":
            _set_cpu_threads(cfg)  # before paddle is imported: its OpenMP runtime reads the variable once
            if micro:
                from training.micro.case import run as entry
            else:
                from training.paddle.train import train as entry

            entry(cfg)
        else:
            raise SystemExit(f"framework {cfg.runtime.framework!r} has no workload in this accelbench")
    except UnsupportedOnDevice as exc:
        # The record is what the orchestrator reads (the round is ``unsupported``, not ``failed``); the line
        # on stderr is for whoever reads the log.
        perflog.emit(perflog.UnsupportedRecord(rank=exc.rank or 0, reason=str(exc)))
        print(f"accelbench: not supported on this device: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(contract.EXIT_UNSUPPORTED) from None


def _set_cpu_threads(cfg: WorkerConfig) -> None:
    """Paddle's launcher pins OMP_NUM_THREADS to 1 on import. On a CPU give each rank its share of the cores,
    which is what torchrun's default amounts to here (all cores for one process, 1 each when ranks fill them)."""
    if not cfg.runtime.device.is_cpu:
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    ranks_here = int(os.environ.get("PADDLE_LOCAL_SIZE", 1))
    os.environ["OMP_NUM_THREADS"] = str(max(1, cores // ranks_here))


if __name__ == "__main__":
    main()
