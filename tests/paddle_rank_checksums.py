"""Run by ``tests/test_paddle_layouts.py`` under ``paddle.distributed.launch``: per rank, one Paddle worker
for each ``CONFIG OUT`` pair in turn (configs of one fleet layout: a process has one, see tests/parity_worker.py).

Writes ``<OUT>/rank<N>.json``: per parameter, a SHA-256 of its values and whether fleet marks it
tensor-parallel (``is_distributed``), both for the model as ``build_model`` returns it and for the model
the worker keeps after fleet's wrappers. Not collected by pytest (no ``test_`` prefix).
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path


def _checksums(model) -> dict:
    return {name: {"sha256": hashlib.sha256(param.numpy().tobytes()).hexdigest(),
                   "distributed": bool(getattr(param, "is_distributed", False))}
            for name, param in model.named_parameters()}


def main(pairs: list[str]) -> None:
    import gc

    from training.contract.names import read_ranks
    from training.paddle import train
    from training.run_pretraining import load_config

    built: dict = {}
    build_model = train.build_model

    def recording(*args, **kwargs):
        model = build_model(*args, **kwargs)
        built.update(_checksums(model))
        return model

    train.build_model = recording
    ranks = read_ranks("paddle")
    for config, out in zip(pairs[::2], pairs[1::2]):
        built.clear()
        worker = train.PaddleWorker(load_config(config), ranks)
        result = {"tp_rank": worker.layout.tp_rank, "built": dict(built), "kept": _checksums(worker.model)}
        Path(out, f"rank{ranks.rank}.json").write_text(json.dumps(result, indent=1))
        del worker
        gc.collect()  # the worker's model and optimizer go before the next one is built


if __name__ == "__main__":
    main(sys.argv[1:])
