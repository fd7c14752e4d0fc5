"""Markdown tables shaped like the ones vendors already publish, ready to paste into a README."""
from __future__ import annotations

from typing import Sequence

from run_benchmarks.results.breakdown.words import changed_parts
from run_benchmarks.results.report import compliance_marks
from run_benchmarks.results.report.compare import NOISE_RULE, Row, Selection, compared, format_change, format_value
from run_benchmarks.results.report.ppo_phases import ppo_phase_views
from run_benchmarks.results.report.footnotes import footnotes
from run_benchmarks.results.report.summary import FIGURE_BY_KEY, CaseSummary
from run_benchmarks.results.report.views import to_markdown

STATUS_NOTE = "n/a"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool]) -> str:
    cells = [[str(c).replace("|", "\\|") for c in row] for row in rows]
    lines = ["| " + " | ".join(header) + " |",
             "| " + " | ".join("---:" if r else "---" for r in right) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    return "\n".join(lines)


def _method(summary: CaseSummary) -> str:
    version = f" {summary.key['framework_version']}" if summary.key.get("framework_version") else ""
    config = summary.config
    return f"{summary.key['framework']}{version}" + (f" {config.removeprefix('config_')}" if config != "-" else "")


def published_table(summaries: Sequence[CaseSummary]) -> str:
    """model | method | devices | batch size | setup | tokens/s/device | speedup (over the first row of the
    same model and hardware)."""
    rows, baseline = [], {}
    for s in summaries:
        tok = s.mean("tokens_per_s_per_device")
        group = (s.key["case"], s.key["hardware"])
        if group not in baseline:
            baseline[group] = (tok, s)
            speedup = "baseline" if tok else STATUS_NOTE
        else:
            base = baseline[group][0]
            speedup = f"{tok / base - 1:+.0%}" if tok and base else STATUS_NOTE
        precision = next((a.get("precision") for a in s.attempts if a.get("precision")), "")
        departs = [w for w, on in (("this row", s.non_compliant), ("the baseline", baseline[group][1].non_compliant
                                                                    and baseline[group][1] is not s)) if on]
        if departs:  # a speedup ranks two rows: never without saying that one departs from its case's policy
            speedup += f" ({' and '.join(departs)} {compliance_marks.NON_COMPLIANT})"
        rows.append([s.key["case"], _method(s), f"{s.key['nnodes']}x{s.key['nprocs_per_node']} {s.key['hardware']}",
                     str(s.batch_size or STATUS_NOTE), precision, s.cell("tokens_per_s_per_device"), speedup])
    return _table(("model", "method", "devices", "batch size", "setup", "tokens/s/device", "speedup"), rows,
                  (False, False, False, True, False, True, True))


# MLPerf's score and quality metric (imports of its result logs), and MFU against a peak calibrated since the
# rounds ran (current_peaks.py): columns only where a row has them.
HEADLINE = ("mfu_current_peak", "time_to_train_s", "eval_accuracy")


def figures_table(summaries: Sequence[CaseSummary]) -> str:
    """Every headline figure, with memory as actual / total per device (the FlagPerf GPT-3 tables); the
    settings that differ between rows (report/facts.py) as columns, so two rows never look alike."""
    from run_benchmarks.results.report.facts import FACT_LABEL, fact_text, varying_settings

    from run_benchmarks.results.report.terminal import samples_only

    keys = varying_settings(summaries)
    extra = [f for f in HEADLINE if any(s.mean(f) is not None for s in summaries)]
    policy = compliance_marks.any_departs(summaries)  # a column only where some row departs
    samples = ["samples_per_s"] if samples_only(summaries) else []  # where a row has no tokens/s
    contention = ["contention"] if any(s.contention_cell() != "n/a" for s in summaries) else []
    rows = []
    for s in summaries:
        statuses = ", ".join(f"{n} {st}" for st, n in s.statuses.items())
        statuses += f" ({compliance_marks.word(s.attempts)})" if policy else ""
        rows.append([s.label, s.config, *[fact_text(s.facts.get(k)) for k in keys], statuses,
                     s.cell("tokens_per_s_per_device"), s.cell("tokens_per_s_total"), *[s.cell(f) for f in samples],
                     s.cell("tflops_per_device"), s.cell("mfu"), s.memory(), s.cell("step_time_median_s"),
                     *[s.cell(f) for f in extra], *[s.contention_cell() for _ in contention]])
    header = ("case", "config", *[FACT_LABEL.get(k, k) for k in keys], "rounds (policy)" if policy else "rounds",
              "tokens/s/device",
              "tokens/s total", *["samples/s" for _ in samples], "TFLOP/s/device", "MFU", "memory actual / total",
              "step time", *[FIGURE_BY_KEY[f].label for f in extra], *contention)
    return _table(header, rows, (False, False) + (True,) * len(keys) + (False,)
                  + (True,) * (6 + len(samples) + len(extra)) + (False,) * len(contention))


def report(summaries: Sequence[CaseSummary], title: str) -> str:
    """The terminal report's tables and its footnotes (what MFU divides by or why it is n/a, the FLOP formula),
    titled as the terminal's is (with the run id ``last`` stood for)."""
    notes = [f"- {s.label} {s.config}: {flag}" for s in summaries for flag in s.flags]
    parts = [f"## {title}", "", published_table(summaries), "", figures_table(summaries), "",
             "Warm-up steps excluded; ± is the coefficient of variation over rounds."]
    note = compliance_marks.ranking_note(summaries)
    parts += ["", f"**{note}**"] if note else []
    lines = footnotes(summaries)
    if lines:
        parts += ["", *[f"- {line}" for line in lines]]
    parts += [f"\n{to_markdown(view)}" for view in ppo_phase_views(summaries)]  # PPO workloads' phases
    if notes:
        parts += ["", "Flags:", *notes]
    return "\n".join(parts) + "\n"


def compare_table(a: Selection, b: Selection, rows: Sequence[Row]) -> str:
    header, figures = ["case"], compared(rows)
    for figure in figures:  # memory: the definition both sides have, named in each row's cells
        label = FIGURE_BY_KEY[figure].label if figure in FIGURE_BY_KEY else "memory/device"
        header += [f"{label} A", f"{label} B", "B vs A"]
    body = [[row.label] + [cell for figure in figures for cell in
                           (*_sides(row, figure), format_change(row, figure))]
            for row in rows]
    moved = [f"- {label}: {line}"  # where the step's time moved; a contended pair's is not judged either
             for label, line in changed_parts([r for r in rows if not r.contended])]
    contended = [f"- {row.label}: not judged: {line}" for row in rows for line in row.contended]
    departing = [f"- {line}" for line in compliance_marks.pair_lines(rows)]
    return (f"A = `{a.text}`, B = `{b.text}`\n\n"
            + _table(header, body, (False,) + (True,) * (len(header) - 1)) + "\n"
            + f"\n{NOISE_RULE}\n"
            + ("\nContended (not judged):\n\n" + "\n".join(contended) + "\n" if contended else "")
            + ("\nWhere the step's time moved (time breakdown):\n\n" + "\n".join(moved) + "\n" if moved else "")
            + ("\nDeparting from the case's policy:\n\n" + "\n".join(departing) + "\n" if departing else ""))


def _sides(row: Row, figure: str) -> tuple[str, str]:
    """Both sides' values; the memory cells say which definition (``66.3 GiB (reserved)``)."""
    a, b = format_value(row.a, figure, row), format_value(row.b, figure, row)
    if figure == "memory" and row.key_of(figure):
        which = row.figure_label(figure).removeprefix("memory ")
        a, b = (v if v in ("(no run)", "n/a") else f"{v} {which}" for v in (a, b))
    return a, b
