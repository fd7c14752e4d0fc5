"""The HTML report's time-breakdown chart: per row, the measured step beside the expected one, each a stacked
bar of compute / communication / pipeline waiting / other (the first ok round's ``metrics.time_breakdown``; a
pipeline's waiting, measured, beside its schedule's ideal bubble, expected). Expected "other" is not modelled and
a missing expected figure draws nothing: the label says so instead of a zero (a pipeline's P2P transfers, which
no stored bandwidth prices, included)."""
from __future__ import annotations

from typing import Sequence

from run_benchmarks.results.breakdown.words import of_summary
from run_benchmarks.results.report import chart_data as data
from run_benchmarks.results.report.charts import STYLE, WIDTH_IN, Figure, _axes, rc_context, to_svg
from run_benchmarks.results.report.summary import CaseSummary

PARTS = (("compute_s", "compute", "#4e79a7"), ("communication_s", "communication", "#f28e2b"),
         ("pipeline_wait_s", "pipeline waiting", "#59a14f"), ("other_s", "other", "#bab0ac"))
EXPECTED_KEYS = {"pipeline_wait_s": "bubble_s"}  # expected: the schedule's ideal bubble (no transfer time)


def bars(summaries: Sequence[CaseSummary]) -> list[str]:
    rows = [(s, tb) for s in summaries if (tb := of_summary(s)) is not None]
    if not rows:
        return []
    title = "time per step: measured (breakdown steps) and expected (micro-benchmarks)"
    labels = data.label_facts([s for s, _ in rows])
    with rc_context(STYLE):
        fig = Figure(figsize=(WIDTH_IN, 0.9 + 1.0 * len(rows)))
        ax = _axes(fig, title, "ms per step", "")
        ticks, names = [], []
        for i, (s, tb) in enumerate(rows):
            ax.text(0, 2.6 * i - 0.55, data.row_label(s, labels, with_case=True).replace("\n", " "), fontsize=8,
                    va="bottom")
            for j, (which, part) in enumerate((("measured", tb["measured"]), ("expected", tb["expected"]))):
                y = 2.6 * i + j * 0.8
                left = 0.0
                for key, name, colour in PARTS:
                    value = part.get(EXPECTED_KEYS.get(key, key) if which == "expected" else key)
                    if value:
                        ax.barh(y, value * 1e3, left=left, color=colour, height=0.7,
                                label=name if (i, j) == (0, 0) else None)
                        left += value * 1e3
                missing = [k[:-2] for k, _, _ in PARTS[:2] if part.get(k) is None]
                missing += ["P2P"] if which == "expected" and "p2p_s" in part and part["p2p_s"] is None else []
                tag = which + (f" ({', '.join(missing)} missing)" if missing else "")
                ticks.append(y)
                names.append(tag)
        ax.set_yticks(ticks, names)
        ax.set_ylim(2.6 * len(rows) - 1.5, -1.3)  # top down, with room for the first row's name
        ax.grid(False, axis="y")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncols=4, frameon=False, fontsize=8)
        return [to_svg(fig, title, "time-breakdown")]
