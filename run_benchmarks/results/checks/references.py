"""Reference figures with tolerances, and the pass/fail check against them.

A case (``cases/<case>/references.yaml``) or a vendor (``vendors/<vendor>/references.yaml``) holds
reference values per hardware and layout. A row with a contended round (results/figures/contention.py) is not judged:
its checks say so and neither pass nor fail (``--check`` exits 7 where nothing else failed). A figure passes
when it lies in
``[value x (1 - lower), value x (1 + upper)]``: a throughput below the band is a regression, one above
it means the reference is stale (update it, deliberately). A case with references but no ok round
fails every figure. The vendor's entry wins over the case's where both match the same figure.

An entry without ``case:`` (in a vendor's file) applies to every case on its hardware; each check names the
entry it came from (file, index and what the entry selects), and ``check_summaries`` also says which rows no
entry matched, so ``--check`` never passes having checked nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from pydantic import Field, NonNegativeFloat, conint

from run_benchmarks.catalog.config import Strict, load_model
from run_benchmarks.catalog.vendor_folders import vendor_folder
from run_benchmarks.pathnames import component
from run_benchmarks.results.report.facts import describe, varying_settings
from run_benchmarks.results.report.summary import FIGURE_BY_KEY, CaseSummary

FILE_NAME = "references.yaml"
CHECKABLE = tuple(FIGURE_BY_KEY)


MAX_UPPER = 10.0  # +1,000 %: a band that reaches ten times the reference above it checks nothing


class Tolerance(Strict):
    """A band around a finite reference: ``lower`` at most 1 (the band's floor reaches zero), ``upper`` at most
    MAX_UPPER. An infinite or absurd tolerance would make ``--check`` pass any figure: refused on load."""

    value: float = Field(allow_inf_nan=False, description="the reference figure")
    lower: NonNegativeFloat = Field(0.05, allow_inf_nan=False, le=1, description="fraction below value still "
                                                                                 "passing")
    upper: NonNegativeFloat = Field(0.05, allow_inf_nan=False, le=MAX_UPPER, description="fraction above value "
                                                                                         "still passing")
    unit: str = ""


class Reference(Strict):
    case: Optional[str] = None  # implied in a case's own file
    hardware: str
    framework: Optional[str] = None  # any framework when unset
    nnodes: Optional[conint(ge=1)] = None
    nprocs_per_node: Optional[conint(ge=1)] = None
    extern_config: Optional[str] = Field(None, description="config name (stem), e.g. config_TP2PP1SH1SP1cpux1x2")
    figures: dict[str, Tolerance]

    def scope(self) -> str:
        """What this entry checks, in words: "every case on A100" for a vendor entry without ``case:``."""
        parts = [f"case {self.case}" if self.case else "every case", f"on {self.hardware}"]
        for name in ("framework", "nnodes", "nprocs_per_node", "extern_config"):
            if getattr(self, name) is not None:
                parts.append(f"{name} {getattr(self, name)}")
        return " ".join(parts[:2]) + (", " + ", ".join(parts[2:]) if parts[2:] else "")

    def matches(self, summary: CaseSummary) -> bool:
        k = summary.key
        return ((self.case is None or self.case == k["case"]) and self.hardware == k["hardware"]
                and self.framework in (None, k["framework"])
                and self.nnodes in (None, k["nnodes"]) and self.nprocs_per_node in (None, k["nprocs_per_node"])
                and self.extern_config in (None, summary.config))


class ReferenceFile(Strict):
    references: list[Reference] = []


@dataclass(frozen=True)
class Check:
    case: str
    config: str
    figure: str
    measured: Optional[float]
    reference: Tolerance
    source: str
    contended: tuple[str, ...] = ()  # the row's contended rounds: not judged (exit 7), neither pass nor fail

    @property
    def low(self) -> float:
        return self.reference.value * (1 - self.reference.lower)

    @property
    def high(self) -> float:
        return self.reference.value * (1 + self.reference.upper)

    @property
    def passed(self) -> bool:
        return self.measured is not None and self.low <= self.measured <= self.high

    @property
    def verdict(self) -> str:
        if self.contended:
            return f"not judged: contended ({'; '.join(self.contended)})"
        if self.measured is None:
            return "FAIL (no figure: no ok round)"
        if self.passed:
            return "pass"
        worse = (self.measured < self.low) == FIGURE_BY_KEY[self.figure].higher_is_better
        return "FAIL (regression)" if worse else "FAIL (better than the band: update the reference?)"


def _validated(path: Path, case: Optional[str]) -> list[tuple[Reference, str]]:
    from run_benchmarks.errors import UserError

    refs = load_model(ReferenceFile, path).references
    out = []
    for i, ref in enumerate(refs):
        unknown = sorted(set(ref.figures) - set(CHECKABLE))
        if unknown:
            raise UserError(f"{path}: references[{i}].figures: unknown figure {unknown[0]!r}",
                            f"use one of: {', '.join(CHECKABLE)}")
        if case is not None:
            ref = ref.model_copy(update={"case": case})
        out.append((ref, f"{path} references[{i}] ({ref.scope()})"))
    return out


def load_references(cases_dir: Path, vendors_dir: Path, case: str, vendor: Optional[str],
                    row: str = "a stored row", vendor_dir: Optional[Path] = None) -> list[tuple[Reference, str]]:
    """The case's references, then the vendor's (later entries win), from its folder (``vendor_dir``, else the
    one the checkout or an installed package holds). Both names come from a stored row (maybe from an imported
    bundle): each must be one plain path component before it becomes a path."""
    fix = ("the row was not written by accelbench (an imported bundle?): leave that run out of the command; a "
           "case or vendor name is one folder name")
    component(case, f"{row}: its case", fix)
    if vendor:
        component(vendor, f"{row}: its vendor", fix)
    found = []
    case_file = cases_dir / case / FILE_NAME
    if case_file.is_file():
        found += _validated(case_file, case)
    if vendor:
        vendor_file = (vendor_dir or vendor_folder(vendors_dir, vendor)) / FILE_NAME
        if vendor_file.is_file():
            found += _validated(vendor_file, None)
    return found


def check(summary: CaseSummary, references: list[tuple[Reference, str]], varying: tuple[str, ...] = ()) -> list[Check]:
    """``varying``: the layout facts that differ between the summaries checked together, named beside the
    config so two workloads of one case (micro batch 4 and 16) are two lines that say which is which."""
    chosen: dict[str, tuple[Tolerance, str]] = {}
    for ref, source in references:
        if ref.matches(summary):
            for figure, tolerance in ref.figures.items():
                chosen[figure] = (tolerance, source)
    config = summary.config + (f" ({describe(summary.facts, varying)})" if varying else "")
    return [Check(summary.label, config, figure, summary.mean(figure), tol, source, tuple(summary.contended))
            for figure, (tol, source) in chosen.items()]


def check_all(summaries: list[CaseSummary], cases_dir: Path, vendors_dir: Path) -> list[Check]:
    return check_summaries(summaries, cases_dir, vendors_dir)[0]


def check_summaries(summaries: list[CaseSummary], cases_dir: Path,
                    vendors_dir: Path) -> tuple[list[Check], list[str]]:
    """The checks, and for each row no reference entry matched a line saying which row and which files were
    read. Each summary is one workload (report/summary.py groups by its hash), so a reference is checked
    against the mean of rounds that ran the same thing, never a blend of two batch sizes."""
    varying = tuple(varying_settings(summaries))
    cache: dict[tuple, list] = {}
    out, unchecked = [], []
    for summary in summaries:
        key = (summary.key["case"], summary.key.get("vendor"))
        if key not in cache:
            cache[key] = load_references(cases_dir, vendors_dir, *key, row=f"row {summary.label}")
        found = check(summary, cache[key], varying)
        out += found
        if not found:
            files = [str(cases_dir / key[0] / FILE_NAME)] + ([str(vendor_folder(vendors_dir, key[1]) / FILE_NAME)]
                                                              if key[1] else [])
            which = f" ({describe(summary.facts, varying)})" if varying else ""
            unchecked.append(f"{summary.label} {summary.config}{which}: no entry matches "
                             f"(read {' and '.join(f + ('' if Path(f).is_file() else ' (absent)') for f in files)})")
    return out, unchecked
