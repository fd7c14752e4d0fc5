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

CONTRACT_VERSION = 1

# Entry points the orchestrator starts on a node.
WORKER_MODULE = "training.run_pretraining"
WORKER_SCRIPT = "training/run_pretraining.py"  # launchers that take a script (paddle.distributed.launch)
MONITOR_MODULE = "training.monitor"
PORT_SCRIPT = "training/contract/ports.py"  # master_port auto: run as a file on the master host (ports.py)

# The precisions a GEMM peak is measured and declared in (vendor.yaml peak_tflops, measured_peaks.yaml, the
# micro-benchmark's dtype), in the order tables show them.
GEMM_DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8")

# Environment the orchestrator sets for every process of a node.
ENV_NODE_RANK = "ACCELBENCH_NODE_RANK"

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

# Words a vendor may write in a declared command (device count, monitor): the node's interpreter and the
# folder holding training/ and vendors/ there. Filled into argv words, never into a shell line.
PLACEHOLDERS = ("{python}", "{code_root}")


def expand_placeholders(argv, python: str, code_root: str) -> list[str]:
    return [str(word).replace("{python}", python).replace("{code_root}", code_root) for word in argv]
