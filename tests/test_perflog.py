import pytest

from training.contract import perflog


def test_records_round_trip_through_a_line():
    step = perflog.StepRecord(rank=3, step=7, warmup=False, step_time_s=0.25, tokens=4096, loss=2.5)
    line = perflog.format_record(step)
    assert line.startswith(perflog.PREFIX) and "\n" not in line
    assert perflog.parse_line(line) == step
    assert perflog.parse_line("2026 INFO some other worker output " + line) == step  # prefix may follow log noise


def test_ordinary_lines_are_not_records():
    assert perflog.parse_line("step 3 loss 2.0") is None


@pytest.mark.parametrize("payload, fragment", [
    ('{"v": 99, "kind": "step"}', "version 99"),
    ('{"v": 1, "kind": "teleport"}', "unknown perf record kind"),
    ('{"v": 1, "kind": "step", "rank": 0}', "step record"),
    ("{not json", "not valid JSON"),
])
def test_malformed_records_are_reported(payload, fragment):
    with pytest.raises(perflog.PerfLogError) as info:
        perflog.parse_line(perflog.PREFIX + payload)
    assert fragment in str(info.value)


def test_unknown_fields_from_a_newer_minor_writer_are_ignored():
    line = perflog.PREFIX + ('{"v":1,"kind":"end","rank":0,"steps":3,"peak_memory_bytes":5,'
                             '"memory_total_bytes":null,"memory_kind":"rss","extra":1}')
    assert perflog.parse_line(line).peak_memory_bytes == 5
