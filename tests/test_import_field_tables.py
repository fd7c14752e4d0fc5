"""The line formats' field tables (issue 40): each registered line format reads through a table whose every field
says what it counts, in which unit, per device or job, over what stretch, and which project file prints it; a
table that names no known meaning is refused; the README prints every table as the code holds it."""
from __future__ import annotations

import re

import pytest

from run_benchmarks.results.importers import parsers
from run_benchmarks.results.importers.fields import MEANINGS, Field, FieldTable
from run_benchmarks.results.importers.megatron_fields import MEGATRON, MEGATRON_DEEPSPEED
from run_benchmarks.results.importers.nemo_fields import NEMO1, NEMO2
from run_benchmarks.results.importers.paddle_fields import ERNIEKIT, PADDLEFORMERS, PADDLENLP
from run_benchmarks.results.importers.torchtitan_fields import TORCHTITAN

from .runner import ROOT

TABLES = {"megatron": [MEGATRON], "megatron-deepspeed": [MEGATRON_DEEPSPEED], "nemo": [NEMO1, NEMO2],
          "torchtitan": [TORCHTITAN], "paddlenlp": [PADDLENLP], "paddleformers": [PADDLEFORMERS],
          "erniekit": [ERNIEKIT]}
PROJECTS = {"NVIDIA/Megatron-LM", "microsoft/Megatron-DeepSpeed", "NVIDIA/NeMo", "pytorch/torchtitan",
            "PaddlePaddle/PaddleNLP", "PaddlePaddle/PaddleFormers", "PaddlePaddle/ERNIE"}


def test_every_line_format_has_a_parser_and_every_field_its_meaning_unit_and_printing_file():
    formats = {p.format for _, p in parsers.PARSERS.items()} - {"mllog"}
    assert formats == set(TABLES), formats
    for tables in TABLES.values():
        for table in tables:
            for f in table.fields:
                assert f.meaning in MEANINGS and f.per in ("device", "job", "rank") and f.span
                assert f.source.split(" ")[0] in PROJECTS and f.source.endswith(".py"), f.source
    throughput = {"samples_per_s", "tokens_per_s", "tokens_per_s_per_device", "step_time_s", "steps_per_s"}
    assert all({f.meaning for t in tables for f in t.fields} & throughput for tables in TABLES.values())


@pytest.mark.parametrize("broken, says", [
    (Field("x", "speed", "x/s", 1, "job", "interval", "a/b c.py"), "meaning 'speed' is none of"),
    (Field("x", "loss", "", 1, "node", "interval", "a/b c.py"), "per 'node'"),
    (Field("x", "loss", "", 1, "job", "interval", "somewhere"), "source 'somewhere' is not 'owner/repo path'"),
    (Field("x", "step_time_s", "", 1, "job", "interval", "a/b c.py"), "no unit"),
])
def test_a_table_with_a_field_that_says_nothing_true_is_refused_when_built(broken, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        FieldTable("t", "t", (broken,))


def test_a_field_reads_its_number_in_its_meanings_unit():
    (ms,) = [f for f in MEGATRON.fields if f.key == "elapsed time per iteration (ms)"]
    assert ms.value("1,234.5") == pytest.approx(1.2345) and ms.value("n/a") is None
    hardware = PADDLEFORMERS.by_key["interval_hardware_tflops_per_device"]  # TFLOP/s of 2**40 FLOP
    assert hardware.value("100") == pytest.approx(100 * 2**40 / 1e12)
    assert MEGATRON.read([("lm loss", "2.5"), ("unknown", "3")]) == {"loss": 2.5}


def test_the_readme_prints_every_field_table_as_the_code_holds_it():
    readme = (ROOT / "README.md").read_text()
    for fmt, tables in TABLES.items():
        for table in tables:
            assert table.markdown() in readme, f"README: the field table of {table.format} ({fmt}) is not current"
