"""The workload half of accelbench: runs inside a container (or locally).

Nothing here imports ``run_benchmarks``; the orchestrator talks to this half only
through the command line of ``run_pretraining.py`` and the perf records of
``perflog.py``.
"""
