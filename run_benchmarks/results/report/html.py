"""One self-contained HTML file: tables, reference checks, charts, the environment; and the compare page.

Rendered with jinja2 templates (autoescaped); charts come from report/charts.py as inline SVG, so the file
opens anywhere without network access or extra files. A PPO workload's per-phase table (ppo_phases.py) follows
the figure tables, as in the terminal and Markdown reports. The tables carry the layout and batch facts that
differ between rows as columns of their own (report/facts.py), so two rows never look alike.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Optional, Sequence

import jinja2

from run_benchmarks import __version__
from run_benchmarks.results.figures.analyze import CV_FLAG
from run_benchmarks.results.breakdown import words as breakdown_words
from run_benchmarks.results.store.schema import Attempt
from run_benchmarks.results.report import breakdown_chart, chart_data, charts, compliance_marks, loss_chart, micro_charts
from run_benchmarks.results.report.ppo_phases import ppo_phase_views
from run_benchmarks.results.report.summary import FIGURE_BY_KEY, CaseSummary
from run_benchmarks.results.report.views import to_html

# Two tables rather than one of 20 columns: each fits a 1400 px page with its numbers on one line.
TABLE_GROUPS = (
    ("Throughput", ("tokens_per_s_per_device", "effective_tokens_per_s_per_device", "tokens_per_s_total",
                    "samples_per_s", "tflops_per_device", "mfu")),
    ("Time, loss and energy", ("step_time_median_s", "init_time_s", "first_step_time_s", "wall_time_s", "loss_last",
                               "accel_util_mean", "power_w_mean", "energy_j", "tokens_per_joule")),
    ("MLPerf's result", ("time_to_train_s", "eval_accuracy")),  # an imported MLPerf log's score and metrics
)
TABLE_FIGURES = tuple(f for _, group in TABLE_GROUPS for f in group)
IMPORTED_ONLY = ("time_to_train_s", "eval_accuracy")  # never listed as missing from accelbench's own rows


def _fmt(figure: str, value: Optional[float]) -> str:
    return "n/a" if value is None else FIGURE_BY_KEY[figure].fmt(value)


def _label(s: CaseSummary) -> str:
    return f"{s.label} {s.config}" if s.config != "-" else s.label


def report_charts(summaries: Sequence[CaseSummary]) -> dict[str, list[str]]:
    """The page's charts by section: per-model bars (two a row), then the wide and the line charts."""
    palette = charts.Palette()
    per_model = charts.model_bars(summaries, palette)
    wide = charts.scaling(summaries, palette)
    other = charts.mfu_against_batch(summaries) + charts.loss_curves(summaries, palette)
    steps = {}
    for s in summaries:
        for a in s.ok[:1]:
            series = (a.get("metrics") or {}).get("step_time_series") or []
            if series:
                steps[_series_name(s, summaries)] = [(x, y * 1e3) for x, y in series]
    if steps:
        other.append(charts.lines("step time over the run (slowest rank, first ok round)", steps, "step", "ms",
                                  "steps"))
    other += _monitor_charts(summaries) + charts.memory_bars(summaries, palette) + breakdown_chart.bars(summaries)
    return {"per_model": per_model, "wide": wide, "other": micro_charts.bandwidth_charts(summaries) + other}


def _series_name(s: CaseSummary, summaries: Sequence[CaseSummary]) -> str:
    """A legend entry that tells rows apart: the case name with the facts that differ (never two alike)."""
    return chart_data.row_label(s, chart_data.label_facts(summaries), with_case=True, width=70).replace("\n", " ")


def _monitor_charts(summaries: Sequence[CaseSummary]) -> list[str]:
    """Utilisation and power of every device over the first ok round of each case (the monitors' samples)."""
    util, power = {}, {}
    for s in summaries:
        for a in s.ok[:1]:
            for node in (a.get("monitor") or {}).get("nodes", []):
                for d in node.get("devices", []):
                    name = f"{_series_name(s, summaries)} node {node.get('node_rank')} dev {d.get('index')}"
                    if d.get("util_series"):
                        util[name] = d["util_series"]
                    if d.get("power_series"):
                        power[name] = d["power_series"]
    out = []
    if util:
        out.append(charts.lines("accelerator utilisation over the round", util, "seconds", "%", "util"))
    if power:
        out.append(charts.lines("power per device over the round", power, "seconds", "W", "power"))
    return out


def _environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.PackageLoader("run_benchmarks.results.report", "templates"),
                              autoescape=True, undefined=jinja2.StrictUndefined)


def _facts(summaries: Sequence[CaseSummary]) -> tuple[list[tuple[str, str]], object]:
    """(fact key, column heading) of the facts that differ between rows, and a cell formatter."""
    varying = chart_data.varying_facts(summaries)
    if not varying:
        return [], str
    from run_benchmarks.results.report.facts import FACT_LABEL, fact_text

    return [(k, FACT_LABEL.get(k, k)) for k in varying], fact_text


def render(title: str, summaries: Sequence[CaseSummary], attempts: Sequence[Attempt], checks: Sequence = (),
           losses: Sequence = ()) -> str:
    """``losses``: loss_check.LossVerdict of each checked round, drawn against their band."""
    formulas = sorted({(a.get("metrics") or {}).get("flop_formula") for s in summaries for a in s.ok} - {None})
    facts, fact_text = _facts(summaries)
    present = {f for f in TABLE_FIGURES if any(s.mean(f) is not None for s in summaries)}
    groups = [(name, [FIGURE_BY_KEY[f] for f in group if f in present]) for name, group in TABLE_GROUPS]
    return _environment().get_template("report.html.j2").render(
        label=lambda s: _label(s) + (f" ({chart_data.fact_words(s, [k for k, _ in facts])})" if facts else ""),
        show_config=any(s.config != "-" for s in summaries),
        title=title, generated=datetime.now(timezone.utc).isoformat(timespec="seconds"), version=__version__,
        cv_flag=f"{CV_FLAG:.0%}", summaries=summaries, table_groups=[g for g in groups if g[1]] or [("Cases", [])],
        empty_figures=[FIGURE_BY_KEY[f].label for f in TABLE_FIGURES if f not in present and f not in IMPORTED_ONLY],
        fmt=_fmt, formulas=formulas, checks=list(checks), charts=report_charts(summaries), losses=list(losses),
        ppo_phases=[to_html(v) for v in ppo_phase_views(summaries)],
        loss_charts=[loss_chart.loss_band(v, f"band{i}") for i, v in enumerate(losses) if v.steps],
        facts=facts, fact_text=fact_text, attempts=[a.row for a in attempts],
        ranking_note=compliance_marks.ranking_note(summaries),
        environment=lambda s: json.dumps(s.environment, indent=2, default=str, sort_keys=True))


def render_compare(a, b, rows: Sequence) -> str:
    """The compare page: the A/B table with rounds, CV and noise marks, per-model bars of both sides and the
    loss curves of the paired runs (do the two train the same model the same way?)."""
    from run_benchmarks.results.report import compare as cmp

    sides = [s for row in rows for s in (row.a, row.b) if s is not None]
    names = {}
    for row in rows:
        for side, s in (("A", row.a), ("B", row.b)):
            if s is not None:
                names[id(s)] = f"{side}: {chart_data.row_label(s, (), width=40)}"
    palette = charts.Palette()
    side_of = {id(s): side for row in rows for side, s in (("A", row.a), ("B", row.b)) if s is not None}
    chart_list = (charts.model_bars(sides, palette, key_of=lambda s: f"{side_of[id(s)]}: {chart_data.colour_key(s)}",
                                     names=names)
                  + charts.loss_curves(sides, palette, names=names))
    return _environment().get_template("compare.html.j2").render(
        title=f"accelbench compare: A = {a.text}, B = {b.text}", a=a, b=b, rows=rows,
        generated=datetime.now(timezone.utc).isoformat(timespec="seconds"), version=__version__,
        compared=[(f, cmp.SHORT[f]) for f in cmp.compared(rows)], value=cmp.format_value, change=cmp.format_change,
        rounds=getattr(cmp, "format_rounds", lambda s: "-" if s is None else str(len(s.ok))),
        noise_rule=getattr(cmp, "NOISE_RULE", ""), charts=chart_list, moved=breakdown_words.changed_parts(
            [r for r in rows if not r.contended]))
