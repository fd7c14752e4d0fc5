"""A round's task figures (perf records of kind ``figure``: an RLHF PPO round's phases) as a table.

The store and ``accelbench show`` do not carry task figures yet; this reads them straight from a round's rank
logs, combined per round as ``run_benchmarks.figures`` does: ``python -m run_benchmarks.report.task_figures
ROUND_DIR [--format markdown]``.
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Sequence

from rich.console import Console

from ..collect import read_rank
from ..figures import Figure, round_figures
from ..frameworks import RankLogs
from .summary import number
from .sweep_views import View, to_markdown, to_rich

_RANK_LOG = re.compile(r"rank(\d+)\.stdout\.log$")


def round_dir_figures(round_dir: Path) -> list[Figure]:
    """Every rank's figures under ``round_dir`` (its node folders), combined over the ranks."""
    logs = []
    for path in sorted(round_dir.glob("*/rank*.stdout.log")):
        match = _RANK_LOG.search(path.name)
        if match:
            logs.append(RankLogs(int(match.group(1)), path, path.with_name(path.name.replace("stdout", "stderr"))))
    return round_figures([read_rank(rank_logs) for rank_logs in logs])


def figures_view(title: str, figures: Sequence[Figure]) -> View:
    """One row per figure; each formula once, as a note the rows point to ([1], [2] ...)."""
    formulas = list(dict.fromkeys(f.formula for f in figures if f.formula))
    rows = [[f.key, number(f.value), f.unit, f"{f.ranks} rank(s)",
             f"[{formulas.index(f.formula) + 1}]" if f.formula else ""] for f in figures]
    notes = [f"[{i}] {formula}" for i, formula in enumerate(formulas, 1)]
    return View(title, ["figure", "value", "unit", "from", "formula"], rows, notes)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("round_dir", type=Path, help="a round's folder (holds the node folders)")
    parser.add_argument("--format", choices=("table", "markdown"), default="table")
    args = parser.parse_args(argv)
    view = figures_view(f"task figures of {args.round_dir} (warm-up excluded)", round_dir_figures(args.round_dir))
    if args.format == "markdown":
        print(to_markdown(view))
    else:
        Console().print(to_rich(view))


if __name__ == "__main__":
    main()
