"""A folder of MLPerf result files (one run each): every file its own row, and the folder's MLPerf score.

MLPerf scores a benchmark over several runs: mlperf-logging's result summarizer drops the fastest and the
slowest run (more where some did not converge) and averages the rest's time to train, the olympic mean. An
import of a folder stores each file as the single files are (its own time to train and figures) and adds the
summarizer's score of the whole folder to each row (``mlperf_score_s``, with the ruleset, the runs counted and
the runs a submission needs). The summarizer reads only copies of what accelbench's bounded reader kept of each
file (``mllog_compliance.score_folder``). Which files: the folder's ``result_*.txt`` (a submission's layout),
else its ``*.txt`` and ``*.log``; at most ``MAX_FILES``; never its subfolders.
"""
from __future__ import annotations

from pathlib import Path

from run_benchmarks.errors import UserError
from run_benchmarks.results.importers import CappedWarnings, Imported
from run_benchmarks.results.importers.mllog_compliance import score_folder
from run_benchmarks.results.importers.mllog_events import read

MAX_FILES = 100  # a submission holds 3 to 40 runs of a benchmark


class Folder:
    """The folder reader of ``--format mllog`` (``Parser.folder``)."""

    def files(self, folder: Path) -> list[Path]:
        found = sorted(p for p in folder.glob("result_*.txt") if p.is_file())
        found = found or sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in (".txt", ".log"))
        if not found:
            raise UserError(f"{folder}: no MLPerf result file in the folder (result_*.txt, or *.txt / *.log)",
                            "give the folder of one benchmark's result files, or the files themselves")
        if len(found) > MAX_FILES:
            raise UserError(f"{folder}: {len(found):,} result files, more than the {MAX_FILES} one benchmark's "
                            "submission holds", "give the folder of one benchmark's runs")
        return found

    def score(self, folder: Path, parsed: list[tuple[Path, Imported]]) -> str:
        """Adds the folder's score to each row; returns the line the import prints about it."""
        benchmarks = {imported.details.get("submission_benchmark") for _, imported in parsed}
        if len(benchmarks) != 1:
            line = (f"{folder}: not scored as one benchmark: its files name "
                    + ", ".join(sorted(map(repr, benchmarks))))
            _note(parsed, line)
            return line
        (benchmark,) = benchmarks
        runs = []
        for path, _ in parsed:  # the package's lines of each, as the bounded reader kept them
            log = read(path, CappedWarnings(), [])
            runs.append((path.name, log.loglines))
        score = score_folder(runs, benchmark)
        if score.minutes is None:
            line = f"{folder}: no MLPerf score of the {len(parsed)} run(s): {score.note}"
            _note(parsed, line)
            return line
        short = (f"; a submission needs {score.required} runs of {benchmark}, this folder holds {len(parsed)}: not "
                 "an official score" if score.required and len(parsed) < score.required else "")
        said = (f"mlperf-logging's result summarizer (training {score.ruleset} rules) over {folder}: the olympic mean "
                f"of the time to train of {len(score.counted)} of {len(parsed)} run(s) (the fastest and slowest "
                f"dropped, and any that did not converge or pass the rules){short}")
        for path, imported in parsed:
            imported.metrics["mlperf_score_s"] = score.minutes * 60
            imported.metrics["mlperf_score_counted"] = path.name in score.counted
            imported.source("mlperf_score_s", f"log folder: {said}")
        return f"{folder}: MLPerf score {score.minutes:,.2f} min — {said}"


def _note(parsed: list[tuple[Path, Imported]], line: str) -> None:
    for _, imported in parsed:
        imported.warnings.append(line)
