"""Micro-benchmarks: GEMM TFLOP/s, memory bandwidth and collective bandwidth, measured by one framework-free
piece of code (gemm.py, membw.py, collectives.py) over each framework's device operations (torch_ops.py:
``torch.accelerator`` and ``torch.distributed``; paddle_ops.py: ``paddle.set_device`` and
``paddle.distributed``), reported as perf-record figures."""
