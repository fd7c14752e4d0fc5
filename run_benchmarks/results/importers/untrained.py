"""Runs that trained nothing: stored ``failed`` with the flag ``trained_nothing``, never as a plain ok.

A log can show steady throughput from a run whose optimizer never changed a weight: its step time has no
optimizer step in it, so its figures are no training figures. The flag is raised, with each cause named, when
the chosen rank's lines (warm-up included) show on every line:

  every iteration skipped     the loss scaler's count of skipped iterations equals the iterations the line
                              covers (Megatron-LM, Megatron-DeepSpeed: ``number of skipped iterations``)
  a nan gradient norm         ``grad norm`` / ``grad_norm`` is nan on every line that prints one, and all do
  a learning rate of 0        every line prints a learning rate, and it is 0
  optimizer not run           the log says so itself (PaddleFormers' Trainer: "All steps were skipped")

The attempt is then ``failed``, its reason starts with ``trained nothing (flag trained_nothing):`` and the
causes, ``metrics["trained_nothing"]`` lists them, and every view shows it: ``show`` and the import's output
(the reason), ``report`` (the row's rounds read ``failed`` and a flag line names the causes), ``compare`` (no
figure from a failed round) and both CSV exports (status and reason columns).
"""
from __future__ import annotations

from typing import Optional

from run_benchmarks.results.importers import Imported
from run_benchmarks.results.importers.lines import Coverage, LineLog, Series

FLAG = "trained_nothing"


def flag(result: Imported, log: LineLog, series: Series, cover: Optional[Coverage]) -> None:
    causes = _causes(log, series, cover)
    if not causes:
        return
    result.metrics[FLAG] = causes
    said = f"trained nothing (flag {FLAG}): " + "; ".join(causes)
    result.status = "failed"
    result.reason = f"{said}; {result.reason}" if result.reason else said


def _causes(log: LineLog, series: Series, cover: Optional[Coverage]) -> list[str]:
    key_of, lines = log.table.key_of, len(series.steps)
    causes = []
    if lines and cover is not None and all(series.present["skipped_iterations"]):
        skipped = series.columns["skipped_iterations"]
        if all(skipped[i] >= cover.covers[i] for i in range(lines)):
            causes.append(f"every iteration was skipped by the loss scaler ({key_of('skipped_iterations')} equals "
                          f"the iterations of each of the {lines} line(s))")
    if lines and series.grad_seen == lines and series.grad_nan == lines:
        causes.append(f"the gradient norm is nan on every line ({key_of('grad_norm')}, {lines} line(s))")
    if lines and series.lr_seen == lines and series.lr_zero == lines:
        causes.append(f"the learning rate is 0 on every line ({key_of('learning_rate')}, {lines} line(s))")
    return causes + [f"optimizer not run: {said}" for said in log.untrained]
