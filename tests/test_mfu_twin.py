"""The mfu table's CPU twin end to end (CI): ``accelbench sweep configs/sweeps/mfu_table_tiny.yaml`` (two
1-process runs of 4 steps: gpt2_tiny for gpt2-1.5b, llama_tiny for llama-3.1-70b-proxy, bf16, sequences of 32),
then ``accelbench table mfu`` from the same store fills our column of the two single-GPU MP cells and gives
each a ratio labelled "CPU twin, not a comparison". Cost: about 30 s on this 2-core machine when it is quiet
(two interpreter and torch starts dominate), up to ~2 minutes when other suites share it."""
from __future__ import annotations

import json

from .conftest import ROOT


def test_the_cpu_twin_fills_the_single_gpu_mp_cells_with_a_ratio_labelled_as_a_twin(cli, tmp_path):
    logs = tmp_path / "logs"
    swept = cli("sweep", str(ROOT / "configs/sweeps/mfu_table_tiny.yaml"), "--log-root", str(logs), "--format",
                "markdown", timeout=600)
    assert swept.returncode == 0, swept.stderr[-3000:] + swept.stdout[-3000:]
    assert "### mfu table: sweep" in swept.stdout and "(CPU twin, not a comparison)" in swept.stdout
    table = cli("table", "mfu", "--log-root", str(logs), "--format", "json")
    assert table.returncode == 0, table.stderr
    rows = {r["cell"]: r for r in json.loads(table.stdout)["rows"] if r["ran_on"]}
    assert set(rows) == {"single-mp-gpt2", "single-mp-proxy"}
    for cell, case in (("single-mp-gpt2", "gpt2_tiny:torch:cpu:1:1"), ("single-mp-proxy", "llama_tiny:torch:cpu:1:1")):
        measure = rows[cell]["measures"]["h100"]
        assert measure["ours"]["case_name"] == case and measure["ours"]["statuses"] == {"ok": 1}
        assert measure["ours"]["value"]["mean"] > 0 and measure["ratio"] > 0
        assert measure["ratio_is_a_comparison"] is False and rows[cell]["settings"].startswith(case)
        assert "non-compliant" not in measure["ours"]["text"]  # the twin keeps its cases' policy
