"""One memory definition per row, named, in every view (results/figures/memory.py): the run's table, ``report`` in
each format, ``show``, ``compare`` and the summary CSV show the same figure for the same row."""
from __future__ import annotations

import csv
import io

from run_benchmarks.results.figures import memory

from .test_results import document, fill

GIB = 2**30


def _rows(tmp_path, monitor: dict | None):
    db = tmp_path / "results.db"
    doc = document("run-m", "gpt3_tiny", "torch", 0.5)
    if monitor is not None:
        doc["monitor"] = monitor
    fill(db, [doc])
    return db


def test_the_run_table_report_show_and_csv_show_the_monitors_device_in_use_named(accelbench, tmp_path):
    # the worker measured its process's RSS (101 MiB); the monitor read 4 GiB in use on the device
    db = _rows(tmp_path, {"device_memory_used_bytes": 4 * GIB})
    table = accelbench("report", "run-m", "--db", str(db))  # the run's own table is this one (print_results)
    assert "4.0 GiB / 16.0 GiB" in table.stdout and "(device in use)" in table.stdout, table.stdout
    md = accelbench("report", "run-m", "--db", str(db), "--format", "markdown")
    assert "4.0 GiB / 16.0 GiB (device in use)" in md.stdout
    shown = accelbench("show", "run-m", "--db", str(db))
    lines = shown.stdout.splitlines()
    (head,) = [line for line in lines if line.strip().startswith("memory/device:")]
    assert head.strip() == "memory/device: 4.0 GiB / 16.0 GiB (device in use, from the monitor)"
    (other,) = [line for line in lines if "also rss" in line]  # the other definition, named, not the headline
    assert other.strip() == "also rss: 101.0 MiB (rss, from the process)"
    assert not any(line.strip().startswith("peak memory/device") for line in lines)
    summary = accelbench("report", "run-m", "--db", str(db), "--format", "summary-csv")
    (row,) = csv.DictReader(io.StringIO(summary.stdout))
    assert float(row["memory_bytes"]) == 4 * GIB and row["memory_definition"] == "device in use, from the monitor"


def test_without_a_monitor_every_view_shows_the_workers_peak_by_its_name(accelbench, tmp_path):
    db = _rows(tmp_path, None)
    table = accelbench("report", "run-m", "--db", str(db), "--format", "markdown")
    assert "101.0 MiB / 16.0 GiB (rss)" in table.stdout
    shown = accelbench("show", "run-m", "--db", str(db))
    assert "memory/device: 101.0 MiB / 16.0 GiB (rss, from the process)" in shown.stdout


def test_compare_uses_the_definition_both_sides_have_and_names_it(accelbench, tmp_path):
    db = tmp_path / "results.db"
    a, b = document("run-a", "gpt3_tiny", "torch", 0.5), document("run-b", "gpt3_tiny", "torch", 0.5)
    a["monitor"] = {"device_memory_used_bytes": 4 * GIB}  # B has no monitor: only the worker's peak is common
    fill(db, [a, b])
    out = accelbench("compare", "run-a", "run-b", "--db", str(db))
    assert out.returncode == 0, out.stderr
    (line,) = [x for x in out.stdout.splitlines() if "memory (" in x]
    assert "memory (rss)" in line and "101.0 MiB" in line and "4.0 GiB" not in line, out.stdout
    md = accelbench("compare", "run-a", "run-b", "--db", str(db), "--format", "markdown")
    assert "101.0 MiB (rss)" in md.stdout and "4.0 GiB" not in md.stdout


def test_the_definitions_order_and_names():
    values = {"device_memory_used_bytes": 3e9, "peak_memory_reserved_bytes": 2e9, "peak_memory_bytes": 1e9}
    found = memory.figures(values.get, "allocated")
    assert [f.label for f in found] == ["device in use, from the monitor", "reserved, from the framework's allocator",
                                        "allocated, from the framework's allocator"]
    assert memory.headline({"peak_memory_bytes": 5.0}.get, None).label == "peak, from the worker"
    assert memory.headline({}.get, "rss") is None
    assert memory.common_key([("device_memory_used_bytes", "device in use"), ("peak_memory_bytes", "rss")],
                             [("peak_memory_reserved_bytes", "reserved")]) is None
    # one store key, two definitions: a GPU's allocated peak is never put against a CPU process's RSS
    assert memory.common_key([("peak_memory_bytes", "allocated")], [("peak_memory_bytes", "rss")]) is None
    assert memory.common_key([("peak_memory_bytes", "rss")], [("peak_memory_bytes", "rss")]) == "peak_memory_bytes"


def test_compare_never_puts_a_gpus_allocated_peak_against_a_cpu_processs_rss(accelbench, tmp_path):
    db = tmp_path / "results.db"
    a, b = document("run-a", "gpt3_tiny", "torch", 0.5), document("run-b", "gpt3_tiny", "torch", 0.5)
    b["metrics"]["memory_kind"] = "allocated"  # same store key (peak_memory_bytes), another definition
    fill(db, [a, b])
    out = accelbench("compare", "run-a", "run-b", "--db", str(db))
    assert out.returncode == 0, out.stderr
    (line,) = [x for x in out.stdout.splitlines() if "memory (" in x]
    assert "memory (no definition in common)" in line and "101.0 MiB" not in line, out.stdout


def test_show_says_when_the_monitors_figures_cover_the_whole_round(accelbench, tmp_path):
    """Steps shorter than the sampling interval (an H200 ran gpt3_tiny's at 5.6 ms): utilisation and power
    come from the whole round, start-up included, and `show` says so beside each; no tokens/J is made of them."""
    steps = {"accel_util_mean": 97.0, "power_w_mean": 605.0, "window": "measured steps", "tokens_per_joule": 48.4}
    whole = {"accel_util_mean": 1.3, "power_w_mean": 92.7, "window": "whole round", "tokens_per_joule": None}
    for name, monitor in (("steps", steps), ("whole", whole)):
        db = tmp_path / f"{name}.db"
        doc = document("run-m", "gpt3_tiny", "torch", 0.5)
        doc["monitor"] = monitor
        fill(db, [doc])
        lines = {line.split(":")[0].strip(): line.strip()
                 for line in accelbench("show", "run-m", "--db", str(db)).stdout.splitlines() if ":" in line}
        if name == "steps":
            assert lines["accelerator utilisation"] == "accelerator utilisation: 97%"
            assert lines["tokens/J"] == "tokens/J: 48.4"
        else:
            said = "over the whole round: no monitor sample fell inside the measured steps"
            assert lines["accelerator utilisation"] == f"accelerator utilisation: 1% — {said}"
            assert lines["power (all devices)"] == f"power (all devices): 93 W — {said}"
            assert "tokens/J" not in lines


def test_show_says_when_the_numbers_came_from_a_tree_with_uncommitted_changes(accelbench, tmp_path):
    """An H200's runs recorded commit b4b1bbe while the files were two commits newer (accelbench_dirty: true):
    `show` printed the bare commit, as if that commit had made the numbers."""
    for dirty in (False, True):
        db = tmp_path / f"{dirty}.db"
        doc = document("run-m", "gpt3_tiny", "torch", 0.5)
        doc["environment"]["orchestrator"]["accelbench_dirty"] = dirty
        fill(db, [doc])
        (line,) = [x for x in accelbench("show", "run-m", "--db", str(db)).stdout.splitlines()
                   if "accelbench commit:" in x]
        assert ("(with uncommitted changes to tracked files)" in line) is dirty, line
