"""The HTML report's matplotlib charts and the compare page.

Summaries come from rows stored the way a run stores them (tests/test_results.py helpers: metrics computed
by figures/analyze.py from perf records); the SVG matplotlib writes is parsed and measured, not string-matched.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from run_benchmarks.results.report import charts
from run_benchmarks.results.report.summary import summarize
from run_benchmarks.results.store.store import ResultStore
from training.contract import perflog
from training.contract.perflog import StepRecord

from .test_results import document, fill

SVG = "{http://www.w3.org/2000/svg}"


def summaries_of(tmp_path, docs):
    db = tmp_path / "results.db"
    fill(db, docs)
    with ResultStore(db) as store:
        return summarize(store.attempts({}, ()))


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def by_id(root: ET.Element, pattern: str) -> list[ET.Element]:
    return [g for g in root.iter(f"{SVG}g") if re.fullmatch(pattern, g.get("id") or "")]


def path_xs(element: ET.Element) -> list[float]:
    """The x coordinates of the first path inside ``element`` (matplotlib writes ``M x y L x y ...``)."""
    d = next(element.iter(f"{SVG}path")).get("d")
    numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", d)]
    return numbers[0::2]


def stroke(element: ET.Element) -> str:
    style = next(element.iter(f"{SVG}path")).get("style")
    return re.search(r"stroke: (#[0-9a-f]{6})", style).group(1)


def test_bar_chart_has_ticks_grid_and_whiskers_of_the_rounds_spread(tmp_path):
    rows = summaries_of(tmp_path, [document("r", "gpt3_tiny", "torch", 0.5),
                                   document("r", "gpt3_tiny", "torch", 0.6, round_=2),
                                   document("r", "gpt3_tiny", "paddle", 0.4)])
    (svg,) = charts.model_bars(rows, charts.Palette())
    root = parse(svg)
    assert "gpt3_tiny" in root.get("aria-label")
    ticks = by_id(root, r"xtick_\d+")
    assert len(ticks) >= 3  # a scale, not just 0 and the maximum
    grid = [g for g in ticks if any(f"stroke: {charts.GRID}" in (p.get("style") or "") for p in g.iter(f"{SVG}path"))]
    assert len(grid) == len(ticks)  # a grid line at every tick
    assert len(by_id(root, r"bars0-bar-\d")) == 2
    # torch ran two rounds (8192 and 6827 tokens/s/device): whiskers of ±1 std; paddle ran one: none
    (whisker,) = by_id(root, r"bars0-err-\d")
    assert whisker.get("id") == "bars0-err-0"
    torch = next(s for s in rows if s.key["framework"] == "torch").figures["tokens_per_s_per_device"]
    bar_xs, whisker_xs = path_xs(by_id(root, "bars0-bar-0")[0]), path_xs(whisker)
    bar_width = max(bar_xs) - min(bar_xs)
    half_whisker = (max(whisker_xs) - min(whisker_xs)) / 2
    assert abs(half_whisker / bar_width - torch.std / torch.mean) < 0.01  # whisker/bar = std/mean, drawn to scale


def test_one_bar_chart_per_model(tmp_path):
    rows = summaries_of(tmp_path, [document("r", "gpt3_tiny", "torch", 0.5), document("r", "llama_tiny", "torch", 0.2),
                                   document("r", "llama_tiny", "paddle", 0.25)])
    svgs = [parse(s) for s in charts.model_bars(rows, charts.Palette())]
    assert [s.get("aria-label").split(":")[0] for s in svgs] == ["gpt3_tiny", "llama_tiny"]
    assert [len(by_id(s, r"bars\d-bar-\d")) for s in svgs] == [1, 2]


def test_twelve_series_get_twelve_colours(tmp_path):
    assert len(set(charts.colours(12))) == 12
    palette = charts.Palette()
    assert len({palette(f"framework {i}") for i in range(12)}) == 12
    assert palette("framework 3") == palette("framework 3")  # one key keeps its colour across charts
    series = {f"run {i}": [(0, i), (1, i + 1)] for i in range(12)}
    root = parse(charts.lines("twelve", series, "step", "loss", "twelve"))
    lines = by_id(root, r"twelve-series-\d+")
    assert len(lines) == 12 and len({stroke(g) for g in lines}) == 12


def test_scaling_and_loss_charts_from_a_sweep(tmp_path):
    docs = [document("s", "gpt3_tiny", "torch", 0.5 + 0.05 * i, world=w) for i, w in enumerate((1, 2, 4))]
    logs = tmp_path / "round1" / "h_noderank0"
    logs.mkdir(parents=True)
    losses = [5.0 - 0.25 * step for step in range(8)]
    (logs / "rank0.stdout.log").write_text("".join(
        perflog.format_record(StepRecord(rank=0, step=step, warmup=step < 2, step_time_s=0.5, tokens=10, loss=loss))
        + "\n" for step, loss in enumerate(losses)))
    docs[0]["results_path"] = str(tmp_path / "round1" / "results.json")
    stored = docs[0]["metrics"].pop("loss_series")  # a record from before the stored series: its log is read
    assert len(stored) == 6 != len(losses)
    rows = summaries_of(tmp_path, docs)
    (scaling,) = charts.scaling(rows, charts.Palette())
    root = parse(scaling)
    labels = [t.text for g in by_id(root, r"xtick_\d+") for t in g.iter(f"{SVG}text")]
    assert labels[:3] == ["1", "2", "4"] and labels[3:] == ["1", "2", "4"]  # devices, on both panels
    assert "scaling efficiency" in scaling
    (loss,) = charts.loss_curves(rows, charts.Palette())  # only the 1-device row's log is there
    (line,) = by_id(parse(loss), r"loss0-series-0")
    ys = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", next(line.iter(f"{SVG}path")).get("d"))][1::2]
    assert len(ys) == len(losses) and ys == sorted(ys)  # every step, loss falling (SVG y grows downward)


def test_report_and_compare_pages_are_self_contained_and_fit_the_page(accelbench, tmp_path):
    db = tmp_path / "results.db"
    fill(db, [document("t", "gpt3_tiny", "torch", 0.5, config="/v/torch/config_X.yaml"),
              document("t", "gpt3_tiny", "torch", 0.55, round_=2, config="/v/torch/config_X.yaml"),
              document("p", "gpt3_tiny", "paddle", 0.4, config="/v/paddle/config_X.yaml")])
    out = tmp_path / "compare.html"
    done = accelbench("compare", "framework=torch", "framework=paddle", "--db", str(db), "--html", str(out))
    assert done.returncode == 0, done.stderr
    assert f"wrote {out}" in done.stdout
    page = out.read_text()
    assert "<table" in page and "table-layout" in page and "overflow-wrap" in page
    assert not re.search(r"(?:src|href)=\"https?://", page)  # nothing fetched from anywhere
    assert "http://" not in re.sub(r"http://www\.w3\.org/[\w/.]+", "", page)
    svgs = re.findall(r"<svg .*?</svg>", page, re.S)
    (bars,) = [s for s in svgs if "tokens/s/device" in parse(s).get("aria-label")]
    assert len(by_id(parse(bars), r"bars0-bar-\d")) == 2  # A's torch row and B's paddle row
    # torch 8192 and 7447 tokens/s/device (mean 7820), paddle 10240: B does 31% more
    torch_mean = (4096 / 0.5 + 4096 / 0.55) / 2
    assert f"{4096 / 0.4 / torch_mean - 1:+.0%}" in page
    missing = accelbench("compare", "framework=torch", "framework=paddle", "--db", str(db), "--html",
                         str(tmp_path / "no" / "c.html"))
    assert missing.returncode != 0 and "no folder" in missing.stdout + missing.stderr
