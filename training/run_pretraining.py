"""The single entry of a worker process: ``python -m training.run_pretraining --config FILE``.

Started by the framework's own launcher (torchrun, paddle.distributed.launch),
one process per device, with the resolved ``WorkerConfig`` the orchestrator
wrote for this round.
"""
from __future__ import annotations

import argparse
import os
import sys

if not __package__:  # run as a file: training/ on sys.path would shadow the real torch with training/torch
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    sys.path.insert(0, os.path.dirname(here))

from training.spec import WorkerConfig  # noqa: E402

# A worker that cannot run the case on its device says so on one stderr line and exits with this code;
# the orchestrator records the round as ``unsupported`` rather than ``failed``.
UNSUPPORTED_MARKER = "accelbench: not supported on this device:"
EXIT_UNSUPPORTED = 3


def load_config(path: str) -> WorkerConfig:
    with open(path, encoding="utf-8") as f:
        return WorkerConfig.model_validate_json(f.read())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", required=True, help="resolved worker config (JSON) written by accelbench")
    args = parser.parse_args(argv)
    cfg = load_config(args.config)
    if cfg.runtime.framework == "torch":
        from torch.distributed.elastic.multiprocessing.errors import record
        from training.torch.precision import UnsupportedOnDevice
        from training.torch.train import train

        try:
            record(train)(cfg)  # under torchrun, a failure's traceback reaches the launcher's summary
        except UnsupportedOnDevice as exc:
            print(f"{UNSUPPORTED_MARKER} {exc}", file=sys.stderr, flush=True)
            raise SystemExit(EXIT_UNSUPPORTED) from None
    else:
        raise SystemExit(f"framework {cfg.runtime.framework!r} has no workload in this accelbench")


if __name__ == "__main__":
    main()
