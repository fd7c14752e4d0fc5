"""The workload half of accelbench: runs inside a container (or locally).

Nothing here imports ``run_benchmarks``. What crosses between the halves is
declared in ``training/contract/names.py``: the worker config (``spec.py``, with the
accelerator kind's ``DeviceSpec``), the perf records (``perflog.py``), the
monitor's files, and the entry modules, environment variables and exit codes.
Inside, one timed loop (``harness.py``) serves every framework (``torch/``,
``paddle/``) on every device; a vendor's worker hooks come in through
``plugins.py``.
"""
