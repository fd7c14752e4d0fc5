"""The names both halves agree on, declared once. Standard library only.

The orchestrator (``run_benchmarks``) and the workload (``training``) never import
each other's code; what crosses between them is exactly:

  the worker config   ``training/contract/spec.py`` ``WorkerConfig`` (JSON, ``spec_version``): what a round asks,
                      including the accelerator kind's worker-side part (``DeviceSpec``)
  perf records        ``training/contract/perflog.py`` (one JSON line each, versioned): what a worker did,
                      including ``unsupported`` records for a case its device cannot run
  monitor files       ``MONITOR_SCHEMA`` below: ``status.json`` + ``host.jsonl`` / ``accelerator.jsonl``
  these names         entry modules, environment variables, exit codes
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping, Optional

CONTRACT_VERSION = 1

# Entry points the orchestrator starts on a node.
WORKER_MODULE = "training.run_pretraining"
WORKER_SCRIPT = "training/run_pretraining.py"  # launchers that take a script (paddle.distributed.launch)
MONITOR_MODULE = "training.monitor"
PORT_SCRIPT = "training/contract/ports.py"  # master_port auto: run as a file on the master host (ports.py)

# The precisions a GEMM peak is measured and declared in (vendor.yaml peak_tflops, measured_peaks.yaml, the
# micro-benchmark's dtype), in the order tables show them.
GEMM_DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8")

# Environment the orchestrator sets for every process of a node. The run's id and its orchestrator
# (``host:pid:start``) say whose process it is: a later run's leftover scan and the node's monitor, which
# tells the run's own CPU time from everyone else's (training/monitor/contention.py), read them.
ENV_NODE_RANK = "ACCELBENCH_NODE_RANK"
ENV_RUN_ID = "ACCELBENCH_RUN_ID"
ENV_ORCHESTRATOR = "ACCELBENCH_ORCHESTRATOR"


@dataclass(frozen=True)
class RankVariables:
    """The environment variables a framework's launcher sets in each process it starts."""

    rank: str
    world_size: str
    local_rank: str
    node_rank: Optional[str] = None  # unset, or a launcher that does not say: ENV_NODE_RANK


# Each framework's launcher (torchrun, paddle.distributed.launch) and the variables it sets: the one place a
# worker learns its rank, whatever the task.
RANK_VARIABLES = {
    "torch": RankVariables(rank="RANK", world_size="WORLD_SIZE", local_rank="LOCAL_RANK", node_rank="GROUP_RANK"),
    "paddle": RankVariables(rank="PADDLE_TRAINER_ID", world_size="PADDLE_TRAINERS_NUM",
                            local_rank="PADDLE_LOCAL_RANK"),
}


@dataclass(frozen=True)
class Ranks:
    rank: int
    world_size: int
    local_rank: int
    node_rank: int


def read_ranks(variables: "RankVariables | str", environ: Mapping[str, str] = os.environ) -> Ranks:
    """This process's place in the job: from a framework's launcher variables (``RANK_VARIABLES``, by framework
    name) or from ``variables`` given; unset means one process (rank 0 of 1)."""
    if isinstance(variables, str):
        if variables not in RANK_VARIABLES:
            raise ValueError(f"no launcher's rank variables for framework {variables!r} "
                             f"(known: {', '.join(RANK_VARIABLES)})")
        variables = RANK_VARIABLES[variables]
    node_rank = environ.get(variables.node_rank) if variables.node_rank else None
    return Ranks(rank=int(environ.get(variables.rank, 0)), world_size=int(environ.get(variables.world_size, 1)),
                 local_rank=int(environ.get(variables.local_rank, 0)),
                 node_rank=int(node_rank if node_rank is not None else environ.get(ENV_NODE_RANK, 0)))

# A worker whose device cannot run the case emits an ``unsupported`` perf record and exits with this.
EXIT_UNSUPPORTED = 3

# The monitor's folder: status.json says which samplers run; each *.jsonl line is one sample.
MONITOR_SCHEMA = "accelbench.monitor/1"
MONITOR_STATUS_FILE = "status.json"
MONITOR_HOST_FILE = "host.jsonl"
MONITOR_ACCELERATOR_FILE = "accelerator.jsonl"
# Fields a device reading may carry (any may be missing or None): what a command monitor's parser fills.
DEVICE_FIELDS = ("index", "name", "util_percent", "mem_used_bytes", "mem_total_bytes", "power_w", "temp_c",
                 "sm_clock_mhz", "mem_clock_mhz")
# Fields of a process on a device (a command monitor's ``processes`` query; NVML's compute processes).
PROCESS_FIELDS = ("index", "pid", "util_percent", "mem_used_bytes")

# Words a vendor may write in a declared command (device count, monitor, probes) and in worker_plugin: the
# node's interpreter, the folder holding training/ there, and the vendor's own folder there (in the checkout,
# in an installed vendor package, or its copy on a remote host). Filled into argv words, never a shell line.
PLACEHOLDERS = ("{python}", "{code_root}", "{vendor_dir}")
# The vendor's folder as this node sees it: set by the orchestrator in every node's environment.
ENV_VENDOR_DIR = "ACCELBENCH_VENDOR_DIR"


def expand_placeholders(argv, python: str, code_root: str, vendor_dir: Optional[str] = None) -> list[str]:
    """``argv`` with the placeholders filled; ``vendor_dir`` None: the node's ``ENV_VENDOR_DIR``."""
    return [expand_vendor_dir(str(word).replace("{python}", python).replace("{code_root}", code_root), vendor_dir)
            for word in argv]


def expand_vendor_dir(text: str, vendor_dir: Optional[str] = None) -> str:
    """``text`` with ``{vendor_dir}`` filled: from ``vendor_dir``, else this node's ``ENV_VENDOR_DIR``."""
    if "{vendor_dir}" not in text:
        return text
    folder = vendor_dir if vendor_dir is not None else os.environ.get(ENV_VENDOR_DIR)
    if not folder:
        raise ValueError(f"{text!r} names {{vendor_dir}} but {ENV_VENDOR_DIR} is not set on this node (accelbench "
                         "sets it for every node it starts)")
    return text.replace("{vendor_dir}", folder)
