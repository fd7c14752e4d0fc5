"""One mechanism for every reference table: the source's cells (published/<table>.yaml), our stored runs placed
into them, and per cell and measure the published figure, ours and their ratio.

A table is a ``ReferenceTable`` plug-in (registered in ``tables/__init__.py``) that says four things: which
measures its cells have (a column group each: published, ours, ratio), how a stored workload is placed into a
cell (``place``: from the layout facts and settings it stored), what a published figure is in our units and
formula (``published_value``), and how our setup reads. Everything else is here and in render.py/chart.py:
joining runs to cells, rows per hardware, the ratio, cells not run and why, the text, JSON and bars.

Rows: one per published cell and hardware our runs of it ran on; a cell nobody ran is one row that says why
(``Cell.why_not_run``, or "not run" with the shipped sweep's settings for it); a workload placed into a key the
source has no cell for (a CPU twin of another shape, a layout the source did not measure) gets a row of its own
after the source's, marked as not in the source. A figure measured on other hardware than the source's (a CPU
twin) still gets its ratio, labelled as a twin: it shows the table fills, it compares nothing.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import zip_longest
from typing import Optional, Sequence, Union

from run_benchmarks.catalog.compliance import NON_COMPLIANT
from run_benchmarks.results.figures.analyze import Stats
from run_benchmarks.results.report.summary import FIGURE_BY_KEY, CaseSummary
from run_benchmarks.results.tables.published import PublishedFigure, PublishedTable, load


@dataclass(frozen=True)
class Measure:
    """A column group of the table: one figure, published and ours."""

    name: str  # the key of the cell's figures in the data file
    heading: str  # column words
    figure: str  # our figure: a summary figure key (report/summary.py) or what ``ours_value`` reads
    chart: bool = True  # drawn as bars on the HTML page


@dataclass(frozen=True)
class Cell:
    id: str
    key: tuple  # what ``place`` returns for a workload of this cell
    labels: tuple[str, ...]  # the row's words under the table's label columns
    published: dict[str, tuple[PublishedFigure, ...]] = field(default_factory=dict)
    source: str = ""  # the source id; "" for a row the source has not
    conditions: str = ""
    why_not_run: str = ""  # said when no run is placed here (several GPUs, a library that cannot be installed)


@dataclass(frozen=True)
class Placement:
    """Where a workload goes: its cell's key and measure ("": every measure of the table: one workload gives
    them all), and (for a key the source has no cell for) the labels of the row of its own it gets."""

    key: tuple
    measure: str = ""
    labels: tuple[str, ...] = ()


@dataclass
class Row:
    cell: Cell
    hardware: Optional[str]  # what our runs of this row ran on; None when nothing was placed
    ours: dict[str, CaseSummary] = field(default_factory=dict)  # measure name -> workload summary

    @property
    def any_summary(self) -> Optional[CaseSummary]:
        return next(iter(self.ours.values()), None)


@dataclass(frozen=True)
class Choice:
    """The published figure a row's measure is compared with: the first whose ``expect`` facts our run has
    (``matches``), else the cell's first (``matches`` False where a run is there: the setups differ)."""

    figure: Optional[PublishedFigure]
    matches: bool


class ReferenceTable:
    """A plug-in: override what differs; the defaults read one summary figure per measure."""

    name: str = ""
    title: str = ""
    label_headers: tuple[str, ...] = ()
    measures: tuple[Measure, ...] = ()
    extra_headers: tuple[str, ...] = ()  # columns after the measures (finetune's speedup)
    has_published: bool = True  # False: the source publishes no figures (ppo): no published or ratio columns
    sweeps: tuple[str, ...] = ()  # the shipped sweeps of the real rows (configs/sweeps/<name>_table_<hardware>.yaml)
    twin: str = ""  # the CPU twin's sweep (configs/sweeps/<name>_table_tiny.yaml)

    def published(self) -> PublishedTable:
        return load(self.name)

    def cells(self, published: PublishedTable) -> list[Cell]:
        """The source's cells in its order; the key is the labels' values."""
        return [Cell(c.id, tuple(str(v) for v in c.labels.values()), tuple(str(v) for v in c.labels.values()),
                     {m: tuple(f) for m, f in c.figures.items()}, c.source, c.conditions) for c in published.cells]

    def place(self, summary: CaseSummary) -> Union[Placement, str]:
        """Where ``summary`` goes, or why it is left out (a few words: "task pretrain", "framework paddle")."""
        raise NotImplementedError

    def published_value(self, measure: Measure, figure: PublishedFigure, cell: Cell) -> Optional[float]:
        """The published figure in our units and formula."""
        return figure.values.get(measure.figure)

    def conversion(self, measure: Measure, figure: PublishedFigure, cell: Cell) -> str:
        """How ``published_value`` differs from the printed figure, in a few words ("" where it does not)."""
        return ""

    def ours_value(self, measure: Measure, summary: CaseSummary) -> Optional[Stats]:
        return summary.figures.get(measure.figure)

    def ours_text(self, measure: Measure, summary: CaseSummary) -> str:
        """Our figure in words, marked where the workload departs from its case's policy."""
        return self.figure_text(measure, summary) + (f" ({NON_COMPLIANT})" if summary.non_compliant else "")

    def figure_text(self, measure: Measure, summary: CaseSummary) -> str:
        """The mean ± CV over n rounds, with the rounds' endings where some were not ok; OOM; or why none."""
        stats = self.ours_value(measure, summary)
        if stats is None:
            if summary.statuses.get("oom") and not summary.ok:
                return "OOM"
            return _status_words(summary)
        fmt = FIGURE_BY_KEY[measure.figure].fmt if measure.figure in FIGURE_BY_KEY else _number
        text = fmt(stats.mean) + (f" ±{stats.cv:.1%} n={stats.n}" if stats.n > 1 else "")
        if len(summary.ok) < len(summary.attempts):
            text += " (" + ", ".join(f"{n} {s}" for s, n in summary.statuses.items()) + ")"
        return text

    def settings(self, row: Row) -> str:
        """What the row ran: its case name and setup (a row nothing ran is the shipped sweep's, ``Built``)."""
        from run_benchmarks.results.tables.words import run_words

        return run_words(row.any_summary) if row.any_summary is not None else "-"

    def intended(self, cell: Cell) -> str:
        """What would run a cell nothing ran, where the shipped sweeps' ``cell`` labels do not say (ppo's grid)."""
        return "-"

    def extra(self, row: Row) -> list[str]:
        return []

    def notes(self, built: "Built") -> list[str]:
        return []


def _number(x: float) -> str:
    return f"{x:,.4g}" if abs(x) < 1000 else f"{x:,.0f}"


def _status_words(summary: CaseSummary) -> str:
    return "no figure (" + ", ".join(f"{n} {s}" for s, n in summary.statuses.items()) + ")"


def facts_match(expect: dict, summary: CaseSummary) -> bool:
    facts = summary.facts
    return all(str(facts.get(k)).lower() == str(v).lower() for k, v in expect.items())


@dataclass
class Built:
    table: ReferenceTable
    published: PublishedTable
    rows: list[Row]
    left_out: dict[str, int] = field(default_factory=dict)  # why -> how many workloads
    planned: dict[str, str] = field(default_factory=dict)  # cell id -> the shipped sweep's settings for it
    title: str = ""
    picked: list[str] = field(default_factory=list)  # how the runs were chosen, where it needs saying (``last``)

    def choice(self, row: Row, measure: Measure) -> Choice:
        figures = row.cell.published.get(measure.name, ())
        if not figures:
            return Choice(None, False)
        summary = row.ours.get(measure.name)
        if summary is None:
            return Choice(figures[0], True)
        for figure in figures:
            if facts_match(figure.expect, summary):
                return Choice(figure, True)
        return Choice(figures[0], False)

    def source_hardware(self, row: Row) -> Optional[str]:
        source = self.published.sources.get(row.cell.source)
        return source.hardware if source else None

    def twin(self, row: Row) -> bool:
        """Our figures of this row ran on other hardware than the source's: a twin, not a comparison."""
        published = self.source_hardware(row)
        return bool(published and row.hardware and row.hardware.lower() != published.lower())

    def ratio(self, row: Row, measure: Measure) -> Optional[float]:
        """Ours / published, both in our units and formula; None without both or where the setups differ."""
        summary, choice = row.ours.get(measure.name), self.choice(row, measure)
        if summary is None or choice.figure is None or not choice.matches:
            return None
        published = self.table.published_value(measure, choice.figure, row.cell)
        ours = self.table.ours_value(measure, summary)
        if published in (None, 0) or ours is None:
            return None
        return ours.mean / published


def build(table: ReferenceTable, summaries: Sequence[CaseSummary], planned: Optional[dict[str, str]] = None,
          title: str = "") -> Built:
    """Our workloads placed into the table's cells (module docstring: the rows)."""
    published = table.published()
    cells = table.cells(published)
    by_key = {c.key: c for c in cells}
    placed: dict[tuple, dict[str, dict[str, list[CaseSummary]]]] = {}  # key -> hardware -> measure -> summaries
    extra: dict[tuple, Cell] = {}
    left_out: dict[str, int] = {}
    for summary in summaries:
        where = table.place(summary)
        if isinstance(where, str):
            left_out[where] = left_out.get(where, 0) + 1
            continue
        if where.key not in by_key and where.key not in extra:
            extra[where.key] = Cell(f"ours-{len(extra)}", where.key, where.labels or tuple(map(str, where.key)))
        hardware = str(summary.key.get("hardware"))
        for name in [where.measure] if where.measure else [m.name for m in table.measures]:
            placed.setdefault(where.key, {}).setdefault(hardware, {}).setdefault(name, []).append(summary)
    rows: list[Row] = []
    for cell in [*cells, *extra.values()]:
        sources = published.sources.get(cell.source)
        first = (sources.hardware or "").lower() if sources else ""
        runs = placed.get(cell.key, {})
        if not runs:
            rows.append(Row(cell, None))
        for hardware in sorted(runs, key=lambda h: (h.lower() != first, h)):
            measures = runs[hardware]
            names = list(measures)
            # one workload per measure is the table's shape; more (two setups at one batch) get a line each
            for combo in zip_longest(*(measures[n] for n in names)):
                rows.append(Row(cell, hardware, {n: s for n, s in zip(names, combo) if s is not None}))
    return Built(table, published, rows, left_out, dict(planned or {}), title or table.title)
