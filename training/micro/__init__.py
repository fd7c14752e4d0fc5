"""Micro-benchmarks: GEMM TFLOP/s, memory bandwidth and collective bandwidth, measured by the same worker
code on every device (``torch.accelerator`` and ``torch.distributed``), reported as perf-record figures."""
