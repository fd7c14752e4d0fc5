"""The sweep report as a slide (issue 30, "Views"): the model x strategy x batch grid with step time and
TFLOP/s, OOM cells as OOM, no repeated or empty column, and a matplotlib chart on the HTML page only.
Synthetic sweep state, the CLI in-process."""
from __future__ import annotations

import json

from run_benchmarks.sweep import views
from run_benchmarks.sweep.state import STATE_FILE, Row, SweepOptions, save

AXES = ["model", "strategy", "micro_batch"]


def _row(point: int, model: str, strategy: str, batch: int, status: str = "ok", tok: float | None = None) -> Row:
    ok = status == "ok"
    return Row(point, {"model": model, "strategy": strategy, "micro_batch": str(batch)},
               f"{model}:torch:cpu:1:2", status, "" if ok else "CUDA out of memory", world_size=2,
               micro_batch_size=batch, tokens_per_s_per_device=tok, tokens_per_s_total=tok and tok * 2,
               peak_memory_bytes=ok and 2**20 * 300 * batch or None, mfu=ok and 0.25 or None,
               step_time_s=ok and batch * 128 / tok or None, tflops_per_device=ok and tok * 6e6 / 1e12 or None)


ROWS = [_row(0, "gpt2_s", "ddp", 4, tok=1000.0), _row(1, "gpt2_s", "ddp", 8, tok=1200.0),
        _row(2, "gpt2_s", "stage2", 4, tok=900.0), _row(3, "gpt2_s", "stage2", 8, tok=1100.0),
        _row(4, "gpt2_m", "ddp", 4, tok=400.0), _row(5, "gpt2_m", "ddp", 8, "oom"),
        _row(6, "gpt2_m", "stage2", 4, tok=380.0), _row(7, "gpt2_m", "stage2", 8, tok=420.0)]


def test_the_points_table_has_each_figure_once_and_no_empty_column():
    table = views.points(ROWS, AXES)
    assert table.headers == ["point", "model", "strategy", "micro_batch", "status", "tok/s/dev", "step time (s)",
                             "TFLOP/s/dev", "MFU", "peak mem", "why"]  # no "micro batch" twice, no max-batch
    first = dict(zip(table.headers, table.rows[0]))
    assert (first["step time (s)"], first["TFLOP/s/dev"], first["MFU"]) == ("0.512", "0.006", "25.0%")
    assert "why" not in views.points([r for r in ROWS if r.status == "ok"], AXES).headers  # nothing failed


def test_the_grid_is_model_x_strategy_by_batch_with_oom_cells():
    grid = views.pivot(ROWS, AXES)
    assert grid.headers == ["model", "strategy", "micro_batch=4", "micro_batch=8"]
    cells = {tuple(row[:2]): row[2:] for row in grid.rows}
    assert cells[("gpt2_m", "ddp")][1] == "OOM"
    assert cells[("gpt2_s", "ddp")][0] == "1,000 tok/s · 0.512 s · 0.006 TFLOP/s · 1.2 GiB"
    older = Row(0, {"model": "m", "micro_batch": "4"}, "m:torch:cpu:1:1", "ok", tokens_per_s_per_device=10.0)
    assert views.cell(older) == "10 tok/s"  # a sweep stored before rows kept step time and TFLOP/s


def sweep_page(accelbench, tmp_path):
    """The sweep of ROWS saved under ``tmp_path/logs`` and its HTML page written: (logs, page)."""
    logs = tmp_path / "logs"
    save(logs / "sweep-1", SweepOptions(points=[], axes=AXES), ROWS)
    page = tmp_path / "sweep.html"
    done = accelbench("sweep", "--show", "sweep-1", "--log-root", logs, "--format", "html", "--output", page)
    assert done.returncode == 0, done.stderr
    return logs, page


def test_html_has_the_grid_chart_and_the_terminal_never_draws_it(accelbench, tmp_path, monkeypatch):
    logs, page = sweep_page(accelbench, tmp_path)
    html = page.read_text()
    assert 'id="sweep-grid"' in html and "tokens/s per device: model x strategy by micro_batch" in html
    assert html.count(">OOM<") >= 1 and "<td class=\"oom\">OOM</td>" in html  # in the chart and the grid
    monkeypatch.setattr(views, "grid_chart", lambda *a: (_ for _ in ()).throw(AssertionError("drawn")))
    for fmt in ("terminal", "markdown"):
        shown = accelbench("sweep", "--show", "sweep-1", "--log-root", logs, "--format", fmt)
        assert shown.returncode == 0 and "OOM" in shown.stdout and "TFLOP/s" in shown.stdout, shown.stderr


def test_a_sweep_saved_before_the_new_fields_still_shows(accelbench, tmp_path):
    logs = tmp_path / "logs"
    save(logs / "old", SweepOptions(points=[], axes=["micro_batch"]), [_row(0, "m", "ddp", 4, tok=10.0)])
    state = json.loads((logs / "old" / STATE_FILE).read_text())
    for row in state["rows"]:
        del row["step_time_s"], row["tflops_per_device"]
    (logs / "old" / STATE_FILE).write_text(json.dumps(state))
    shown = accelbench("sweep", "--show", "old", "--log-root", logs)
    assert shown.returncode == 0, shown.stderr
    assert "tok/s/dev" in shown.stdout and "MFU" in shown.stdout  # what the old row holds
    assert "step time (s)" not in shown.stdout and "TFLOP/s/dev" not in shown.stdout  # empty columns left out
