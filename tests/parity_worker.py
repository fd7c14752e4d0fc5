"""The parity tests' worker entry: several workers trained in turn inside one launch.

Started by the framework's real launcher with the orchestrator's own launcher argv (``run_benchmarks.plan``),
only this entry in place of ``training/run_pretraining.py`` (see ``tests/parity_launch.py``)::

    python -m torch.distributed.run --nproc-per-node=N ... -m tests.parity_worker --configs LIST
    python -m paddle.distributed.launch --nproc_per_node=N ... tests/parity_worker.py --configs LIST

``LIST`` is a JSON file: ``[[label, config.json], ...]``, each ``config.json`` written by the orchestrator's
planning from a case name and ``--set`` settings, exactly as ``accelbench run`` writes it. For each in turn,
every rank prints a start marker, runs the worker's own entry, ``training.run_pretraining.main`` (the
harness's step loop over ``TorchWorker`` or ``PaddleWorker``, its perf records on stdout as in any run),
prints an end marker, and lets the worker go (models, optimizers, meshes) before the next.

Torch: the default process group (gloo on a CPU; with offload's ``cpu:gloo`` where any config asks for it)
is created here once per launch; each ``TorchWorker`` reuses it and leaves it alone when it closes
(``training/torch/device.py``'s ``init_process_group``); device meshes and sub-groups are each worker's own.
Paddle: ``fleet.init`` sets up the hybrid groups of one strategy, and a process can have only one (a
second call keeps the first topology), so a Paddle launch holds the configs of one hybrid layout only
(``tests/test_paddle.py`` groups them).

A failure ends the launch (the launcher stops every rank), so the markers say which config was running. A
config the device cannot run (the entry's exit 3 after its ``unsupported`` record, on every rank: a Paddle
micro-benchmark a CPU lacks, tests/test_micro_paddle.py) ends as any other, and the next one runs.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys

if __name__ == "__main__":  # as the worker's entry does (training/collector.py): until its first measured step
    gc.disable()

if not __package__:  # run as a file (Paddle's launcher takes a script): the checkout's root, not tests/
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != os.path.realpath(here)]
    sys.path.insert(0, os.path.dirname(here))

MARKER = "ACCELBENCH_PARITY "  # then {"label": ..., "event": "start" | "end"}


def marker(label: str, event: str) -> None:
    print(MARKER + json.dumps({"label": label, "event": event}), flush=True)


def _torch_process_group(config_paths: list[str]) -> bool:
    """Create the launch's one process group (more than one rank); True when created."""
    if int(os.environ.get("WORLD_SIZE", 1)) == 1:
        return False
    from training.run_pretraining import load_config
    from training.torch import device as devices

    configs = [load_config(path) for path in config_paths]
    device_spec = configs[0].runtime.device
    device = devices.open_device(device_spec, int(os.environ.get("LOCAL_RANK", 0)))
    return devices.init_process_group(device_spec, device, offload=any(c.workload.parallel.offload for c in configs))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--configs", required=True, help="JSON: [[label, config.json path], ...]")
    args = parser.parse_args(argv)
    with open(args.configs, encoding="utf-8") as f:
        runs = json.load(f)
    from training import run_pretraining
    from training.contract.names import EXIT_UNSUPPORTED
    from training.run_pretraining import load_config

    framework = load_config(runs[0][1]).runtime.framework
    created = _torch_process_group([path for _, path in runs]) if framework == "torch" else False
    for label, path in runs:
        marker(label, "start")
        try:
            run_pretraining.main(["--config", path])
        except SystemExit as exc:  # a run the device cannot do wrote its unsupported record: the next one runs
            if exc.code != EXIT_UNSUPPORTED:
                raise
        sys.stdout.flush()
        gc.collect()  # the worker's model, optimizer and groups go before the next one is built
        marker(label, "end")
    if created:
        import torch.distributed as dist

        dist.destroy_process_group()


if __name__ == "__main__":
    main()
