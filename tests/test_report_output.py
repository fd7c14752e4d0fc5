"""``report -o FILE`` in the terminal format: the same table as on stdout, without terminal escapes."""
from __future__ import annotations

from .test_results import document, fill


def test_report_to_a_file_in_terminal_format_is_the_table_without_escapes(accelbench, tmp_path):
    db = tmp_path / "results.db"
    fill(db, [document("run-a", "gpt3_tiny", "torch", 0.5), document("run-a", "gpt3_tiny", "paddle", 0.4)])
    out = tmp_path / "report.txt"
    done = accelbench("report", "run-a", "--db", str(db), "-o", str(out))
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert "\x1b[" not in text  # a file gets no colours
    rows = {line.split("│")[1].strip(): line for line in text.splitlines() if line.startswith("│ gpt3_tiny")}
    assert set(rows) == {"gpt3_tiny:torch:cpu:1:2", "gpt3_tiny:paddle:cpu:1:2"}
    assert "8,192" in rows["gpt3_tiny:torch:cpu:1:2"] and "10,240" in rows["gpt3_tiny:paddle:cpu:1:2"]
    assert done.stdout == f"wrote {out}\n"  # the table went to the file only
