"""``accelbench table mfu``: the "Benchmark LLM Training" repository's MFU tables (H100). Rows: layout (single
GPU, DDP, FSDP, FSDP with selective AC) x config (MP = bf16 autocast, + PC = torch.compile default mode, + FP8,
+ SAC) x model (gpt2-1.5b at batch 8, llama-3.1-70b-proxy at batch 2, llama-3.1-8b for selective AC); per row
the published TFLOP/s and MFU, ours, and the ratio.

Two formulas. Ours (training/contract/flops.py): 6 x the matmul weights (the LM head included, embedding
lookups and norms not: they multiply nothing) + 12·L·H·Q·T per token. The source's: 6 x every parameter +
12·L·H·Q·T, so its input embedding counts as if it were a matmul: for the proxy (one layer, 1.05 B embedding
weights of its 2.96 B) its TFLOP/s read 1.53x ours for the same tokens/s; for gpt2-1.5b the two agree within
0.2 %. Each published figure is converted into ours for the shape the source ran (``models`` in the data file:
``converted``), so the ratio is ours / published in one formula, which is our tokens/s over the source's.
MFU: ours divides by the vendor's dense peak for the dtype (H100: bf16 989.5, fp8 1,979 TFLOP/s), as the source
(989.5; its fp8 rows by the fp8 peak), so MFU converts by the same factor.

Placement: our case stands for the source's model (``gpt2_xl`` for gpt2-1.5b, ``llama3.1_70b_1layer`` for the
proxy, ``llama3.1_8b``; the CPU twin's ``gpt2_tiny`` and ``llama_tiny``), the layout from the stored facts (one
device; data parallel without sharding = DDP; sharding stage 3 = FSDP), the config from precision, compile mode
and selective recompute.
"""
from __future__ import annotations

import functools
from typing import Optional, Union

from training.contract import flops
from training.contract.spec import ModelSpec

from run_benchmarks.results.report.summary import CaseSummary
from run_benchmarks.results.tables.core import Built, Cell, Measure, Placement, ReferenceTable
from run_benchmarks.results.tables.published import PublishedFigure, PublishedTable
from run_benchmarks.results.tables.words import recompute_every

MODELS = {"gpt2_xl": "gpt2-1.5b", "llama3.1_70b_1layer": "llama-3.1-70b-proxy", "llama3.1_8b": "llama-3.1-8b",
          "gpt2_tiny": "gpt2-1.5b", "llama_tiny": "llama-3.1-70b-proxy"}  # the last two: the CPU twin's
TE = ("MP + FP8: the source ran Transformer Engine, which cannot be installed on the machines we have: its core "
      "wheel (transformer_engine_cu12 2.20.2) is 729 MB, over what a device call may carry, with no package "
      "registry there, and transformer_engine_torch is a source package compiled against the installed torch with "
      "nvcc; our row runs torchao's float8 training (0.18.0, tensorwise scaling, the setup.cfg fp8 extra) with "
      "torch.compile, the LM head in bf16 (TE ran the llama LM head in fp8 too). The CPU twin has no fp8 row: a "
      "CPU has no fp8 matmul units (the worker refuses fp8 there)")
SEVERAL_GPUS = "not run: needs several GPUs (mfu_table_h100x8.yaml)"
GPUS_NOTE = ("DDP, FSDP and selective AC need several GPUs: the source ran them on every GPU of one H100 machine "
             "(its scripts take torch.cuda.device_count(); the README does not say how many); "
             "configs/sweeps/mfu_table_h100x8.yaml runs them on 8 H100s, the single-GPU rows "
             "configs/sweeps/mfu_table_h100.yaml (benchmarks/gpu_checklist.sh part mfu_table)")


@functools.lru_cache(maxsize=None)
def _factor(shape: tuple) -> float:
    """Our FLOPs per token over the source's, for one model shape."""
    spec = ModelSpec(**dict(shape))
    source = 6 * flops.total_params(spec) + flops.attention_flops_per_token(spec)
    return flops.training_flops_per_token(spec) / source


class MfuTable(ReferenceTable):
    name = "mfu"
    title = "mfu table"
    label_headers = ("layout", "config", "model")
    measures = (Measure("h100", "H100 TFLOP/s/GPU (MFU)", "tflops_per_device"),)
    sweeps = ("configs/sweeps/mfu_table_h100.yaml", "configs/sweeps/mfu_table_h100x8.yaml")
    twin = "configs/sweeps/mfu_table_tiny.yaml"

    def cells(self, published: PublishedTable) -> list[Cell]:
        return [c if c.labels[0] == "single GPU" else Cell(c.id, c.key, c.labels, c.published, c.source,
                                                           c.conditions, SEVERAL_GPUS)
                for c in super().cells(published)]

    def factor(self, model: str) -> float:
        return _factor(tuple(sorted(self.published().models[model].items())))

    def place(self, summary: CaseSummary) -> Union[Placement, str]:
        f, case = summary.facts, str(summary.key["case"])
        if summary.key["framework"] != "torch" or f.get("task", "pretrain") != "pretrain":
            return f"{summary.key['framework']} {f.get('task', '')}".strip()
        model = MODELS.get(case)
        if model is None:
            return f"case {case}"
        layout = _layout(f)
        if layout is None:
            return "a layout the source has not (tensor or pipeline parallel, ZeRO-1/2)"
        config = _config(f)
        if config is None:
            return f"precision {f.get('precision')} or recompute {f.get('recompute')} (the source: bf16 or fp8)"
        if f.get("recompute") == "selective":
            layout = f"{layout} selective AC 1/{recompute_every(f)}"
        return Placement((layout, config, model), "h100", (layout, config, f"{model} ({case})"))

    def published_value(self, measure: Measure, figure: PublishedFigure, cell: Cell) -> Optional[float]:
        value = figure.values.get("tflops_per_device")
        return None if value is None else value * self.factor(cell.labels[2])

    def conversion(self, measure: Measure, figure: PublishedFigure, cell: Cell) -> str:
        tflops, mfu = figure.values.get("tflops_per_device"), figure.values.get("mfu")
        if tflops is None:
            return ""
        factor = self.factor(cell.labels[2])
        said = f"{tflops * factor:,.0f} TFLOP/s" + (f" ({mfu * factor:.0%})" if mfu is not None else "")
        return f"{said} in our formula (x{factor:.3f})"

    def figure_text(self, measure: Measure, summary: CaseSummary) -> str:
        text = super().figure_text(measure, summary)
        if summary.figures.get(measure.figure) is None:
            return text
        mfu = summary.figures.get("mfu")
        return f"{text} TFLOP/s ({'MFU n/a: no peak declared' if mfu is None else f'{mfu.mean:.1%}'})"

    def notes(self, built: Built) -> list[str]:
        factors = ", ".join(f"{m} x{self.factor(m):.3f}" for m in built.published.models)
        return [f"ours: {flops.FORMULA}; MFU = TFLOP/s / the vendor's dense peak for the dtype (H100: bf16 989.5, "
                f"fp8 1,979), as each run stored it",
                f"published figures converted into our formula by ours / the source's FLOPs per token for the "
                f"shape the source ran: {factors} (the source counts the embedding lookup as 6 FLOPs per weight); "
                "the ratio is therefore our tokens/s over the source's",
                TE, GPUS_NOTE]


def _layout(f: dict) -> Optional[str]:
    if (f.get("tensor_parallel") or 1) > 1 or (f.get("pipeline_parallel") or 1) > 1:
        return None
    sharding = str(f.get("sharding") or "none")
    if sharding == "stage3":
        return "FSDP"
    if sharding != "none":
        return None
    return "single GPU" if (f.get("world_size") or 1) == 1 else "DDP"


def _config(f: dict) -> Optional[str]:
    precision, recompute = f.get("precision"), f.get("recompute") or "none"
    if precision not in ("bf16", "fp8") or recompute == "full":
        return None
    words = ["MP"] + (["SAC"] if recompute == "selective" else [])
    if precision == "fp8":  # ours is always compiled (fp8 without compile is refused); the source's was not
        return " + ".join(words + ["FP8"])
    return " + ".join(words + (["PC"] if f.get("train.compile") else []))


TABLE = MfuTable()
