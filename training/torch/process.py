"""A torch worker process's start: its entry under torchrun's error record, so a failure's traceback reaches
the launcher's summary. Imports torch only when the round starts."""
from __future__ import annotations

from typing import Callable

from training.contract.spec import WorkerConfig


def start(cfg: WorkerConfig, load: Callable[[], Callable[[WorkerConfig], None]]) -> None:
    from torch.distributed.elastic.multiprocessing.errors import record

    record(load())(cfg)
