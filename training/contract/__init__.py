"""What both halves agree on: environment names, the workload spec, the perf log format and FLOP formulas. The orchestrator imports nothing else from training/."""
