"""Task figures: perf records of kind ``figure`` read from a rank's log and combined across ranks and rounds."""
import pytest

from run_benchmarks.results.worker_logs import rank_logs as collect
from run_benchmarks.results.figures import task as figures
from run_benchmarks.results.worker_logs.rank_logs import RankLogs
from training.contract import perflog


def _rank_log(tmp_path, rank, records):
    stdout = tmp_path / f"rank{rank}.log"
    stdout.write_text("".join(perflog.format_record(r) + "\n" for r in records) + "ordinary output\n")
    return collect.read_rank(RankLogs(rank=rank, stdout=stdout, stderr=tmp_path / "none"))


def test_figures_are_read_and_combined_as_each_declares(tmp_path):
    ranks = [_rank_log(tmp_path, r, [
        perflog.FigureRecord(rank=r, name="allreduce.busbw", value=10.0 + r, unit="GB/s",
                             params={"bytes": 1024}),
        perflog.FigureRecord(rank=r, name="experience.samples_per_s", value=3.0, unit="samples/s",
                             reduce="sum"),
        perflog.FigureRecord(rank=r, name="allreduce.time", value=1.0 + 2 * r, unit="s", better="lower",
                             reduce="max", params={"bytes": 1024}),
    ]) for r in range(2)]
    assert all(len(r.figures) == 3 and not r.problems for r in ranks)
    by_key = {f.key: f for f in figures.round_figures(ranks)}
    assert by_key["allreduce.busbw[bytes=1024]"].value == 10.5  # mean of 10 and 11
    assert by_key["experience.samples_per_s"].value == 6.0  # sum of 3 and 3
    assert by_key["allreduce.time[bytes=1024]"].value == 3.0 and by_key["allreduce.time[bytes=1024]"].ranks == 2


def test_a_bad_figure_is_named_and_skipped(tmp_path):
    stdout = tmp_path / "rank0.log"
    stdout.write_text(perflog.PREFIX + '{"v":3,"kind":"figure","rank":0,"name":"x","value":1,"unit":"s",'
                      '"reduce":"median"}\n')
    rank = collect.read_rank(RankLogs(rank=0, stdout=stdout, stderr=tmp_path / "none"))
    assert rank.figures == [] and "reduce must be one of" in rank.problems[0]


def test_ranks_that_disagree_on_a_figure_are_refused(tmp_path):
    ranks = [_rank_log(tmp_path, r, [perflog.FigureRecord(rank=r, name="x", value=1.0, unit=unit)])
             for r, unit in enumerate(("GB/s", "MB/s"))]
    with pytest.raises(figures.FigureConflict, match="rank 1 reports MB/s"):
        figures.round_figures(ranks)


def test_rounds_combine_into_stats_per_key():
    one = [figures.Figure("gemm.tflops", 2.0, "TFLOP/s", "higher", {"n": 512})]
    two = [figures.Figure("gemm.tflops", 4.0, "TFLOP/s", "higher", {"n": 512})]
    [row] = figures.across_rounds([one, two])
    assert row["key"] == "gemm.tflops[n=512]" and row["stats"]["mean"] == 3.0 and row["stats"]["n"] == 2
