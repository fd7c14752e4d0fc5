"""The notes under every report's table, in one wording for the terminal and Markdown: why MFU is n/a or
which peak it divides by, how FLOPs were counted, and what one device was."""
from __future__ import annotations

from run_benchmarks.results.rounds.record import DeviceDefinition
from run_benchmarks.results.report import current_peaks


def footnotes(summaries) -> list[str]:
    """Per distinct note, from the rounds' stored metrics: why MFU is n/a, which peak it divides by
    (datasheet or measured, with the value), the FLOP formula. A note that holds for only some rows names
    them, so MFU figures counted two ways are never read as one."""
    notes: dict[tuple[int, str], list[str]] = {}  # (order: MFU, measured MFU, FLOPs; line) -> row labels
    measured = any((a.get("metrics") or {}).get("mfu_measured") is not None for s in summaries for a in s.attempts)
    for s in summaries:
        for attempt in s.attempts:
            m = attempt.get("metrics") or {}
            if not m:
                continue
            mfu_note = current_peaks.without_advice(m.get("mfu_note"), s.current_peak_note)
            lines = [mfu_note and (mfu_note if m.get("mfu") is not None else f"MFU n/a: {mfu_note}")]
            note = m.get("mfu_measured_note") or ""
            if note and m.get("mfu_measured") is None and ("`accelbench calibrate" in (m.get("mfu_note") or "")
                                                           or s.current_peak_note):
                note = ""  # the first line already says to measure one (a CPU), or one was measured since
            if note:
                lines.append(note if note.startswith("MFU (measured)") else
                             ("² MFU (measured) n/a: " if measured else "MFU against a measured peak: n/a, ") + note)
            lines.append(s.current_peak_note)  # an older row against a peak calibrated since (current_peaks.py)
            lines.append(m.get("flop_formula") and f"FLOPs: {m['flop_formula']}")
            for line in filter(None, lines):
                rows = notes.setdefault((2 if line.startswith("FLOPs") else int("measured" in line[:30]), line), [])
                if s.label not in rows:
                    rows.append(s.label)
    labels = {s.label for s in summaries}
    return ([line if set(rows) == labels else f"{line} [{', '.join(rows)}]" for (_, line), rows in sorted(notes.items())]
            + device_lines(summaries))


def device_lines(summaries) -> list[str]:
    """What one device was, per hardware (its vendor file's dies_per_device): every per-device figure is per it."""
    words = {}
    for s in summaries:
        for attempt in s.attempts:
            found = ((attempt.get("record") or {}).get("device_definition") or {})
            if found:
                words.setdefault(DeviceDefinition.model_validate(found).words(), None)
    return [f"per device: {line}" for line in words]
