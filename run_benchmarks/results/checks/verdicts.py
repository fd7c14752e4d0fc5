"""``--check``'s verdicts on stored rows, one way for ``run``, ``sweep`` and ``report``: each figure against its
references.yaml band (checks/references.py), a line per row no reference entry matched, and each ok round of a case
with a loss reference against it (checks/loss_check.py). Printing them and the exit status they give are the CLI's."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from run_benchmarks.results.checks import loss_check, references
from run_benchmarks.results.report.summary import summarize
from run_benchmarks.results.store.store import ResultStore


@dataclass(frozen=True)
class Verdicts:
    checks: list  # references.Check per figure with a reference
    unchecked: list[str]  # a line per row no reference entry matched
    losses: list  # loss_check.LossVerdict per ok round of a case with a loss reference

    def __iter__(self) -> Iterator:
        return iter((self.checks, self.unchecked, self.losses))


def of_summaries(summaries: Sequence, root: Path) -> Verdicts:
    """The verdicts on ``summaries`` against the references of the tree at ``root`` (cases/, vendors/)."""
    checks, unchecked = references.check_summaries(list(summaries), root / "cases", root / "vendors")
    return Verdicts(checks, unchecked, loss_check.check_summaries(summaries, root / "cases"))


def of_run(store: ResultStore, run_id: str, root: Path) -> Verdicts:
    """The verdicts on the rows one run stored (``run --check``, ``sweep --check``)."""
    return of_summaries(summarize(store.attempts(run_ids=[run_id])), root)
