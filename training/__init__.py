"""The workload half of accelbench: runs inside a container (or locally).

Nothing here imports ``run_benchmarks``. What crosses between the halves is
declared in ``training/contract/names.py``: the worker config (``spec.py``, with the
accelerator kind's ``DeviceSpec``), the perf records (``perflog.py``), the
monitor's files, and the entry modules, environment variables and exit codes.
Inside, one lifecycle and one timed loop (``harness.py``) serve every task
(``train_task.py``, ``ppo_task.py``, ``micro/case.py``) on every framework
(``torch/``, ``paddle/``: their operations only) and device; a vendor's worker
hooks come in through ``plugins.py``, for every task.
"""
