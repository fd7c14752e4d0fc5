"""Field table of torchtitan's metric line, old (``wps``, 2024) and new (``tps``, ``tflops``, ``grad_norm``).

torchtitan logs step 1 alone and then every ``metrics.log_freq`` steps; each line covers the steps since the
previous one (its token count, timer and the device's peak memory are reset after every line). ``tps`` / ``wps``
is the tokens this rank saw / the time / the ranks that share its data (tensor, pipeline, context parallel),
i.e. per device; ``memory`` the device's peak *reserved* memory over the interval, in GiB, with its share of the
device in parentheses.
"""
from __future__ import annotations

from run_benchmarks.results.importers.fields import Field, FieldTable

NEW = "pytorch/torchtitan torchtitan/components/metrics.py"
OLD = "pytorch/torchtitan train.py"
GIB = float(1 << 30)

TORCHTITAN = FieldTable("torchtitan", "torchtitan metric lines (MetricsProcessor.log; train.py before it)", (
    Field("loss", "loss", "", 1, "job", "interval", NEW, "the data-parallel mean of the interval's mean loss"),
    Field("grad_norm", "grad_norm", "", 1, "job", "step", NEW, "since 2025"),
    Field("memory", "memory_reserved_peak", "GiB", GIB, "device", "peak over the interval", NEW),
    Field("memory (%)", "memory_share", "% of the device", 0.01, "device", "peak over the interval", NEW,
          "the same peak / the device's total memory"),
    Field("tps", "tokens_per_s_per_device", "tokens/s", 1, "device", "interval", NEW,
          "tokens since the last line / (time x non-data-parallel ranks)"),
    Field("wps", "tokens_per_s_per_device", "tokens/s", 1, "device", "interval", OLD, "tps's name before 2025"),
    Field("tflops", "tflops_per_device", "TFLOP/s", 1, "device", "interval", NEW,
          "torchtitan's own FLOPs per token x tps; 0 where it counts none"),
    Field("mfu", "mfu", "%", 0.01, "device", "interval", NEW, "its TFLOP/s / its own table of peaks"),
), first_report_resets=True, evaluation="validate step")
