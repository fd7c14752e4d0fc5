"""What a received bundle must be beyond its format (archive.py), checked before anything is stored (issue 43):
its sizes, from the headers, before any member's data is read (a bomb is refused in a moment, not after
unpacking gigabytes); no attempt stored ``ok`` with a figure no run can measure (figures/impossible.py, as a
log import checks); a run whose summary.json is empty or unreadable is judged ``aborted``, as its own store
judges it."""
from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Optional

from run_benchmarks import limits
from run_benchmarks.errors import UserError
from run_benchmarks.results.figures.impossible import impossible
from run_benchmarks.results.store.recovery import summary_state


RATIO_AFTER_BYTES = 64 << 20  # the unpacked/packed ratio is judged past this: a small log may be repetitive


def scan_sizes(tar: tarfile.TarFile, bundle: Path, packed_bytes: int) -> None:
    """Every header read once (the reader skips each member's data by its header's size, so the sizes are
    what unpacking it would take), the members' sizes added up as they come and held to the caps before the
    next member is reached: the unpacked size (BUNDLE_BYTES), the number of files and, past
    RATIO_AFTER_BYTES, the unpacked over the packed size (BUNDLE_RATIO)."""
    where = f"{bundle} (nothing was imported)"
    total = files = 0
    max_bytes, max_files, max_ratio = (limits.BUNDLE_BYTES.value(), limits.BUNDLE_FILES.value(),
                                       limits.BUNDLE_RATIO.value())
    for member in tar:
        files += not member.isdir()
        total += max(member.size, 0) if member.isfile() else 0
        if files > max_files:
            raise limits.BUNDLE_FILES.refusal(f"over {max_files:,} files", where)
        if total > RATIO_AFTER_BYTES and total > max_ratio * max(packed_bytes, 1):  # a bomb: said first
            raise limits.BUNDLE_RATIO.refusal(f"{total / max(packed_bytes, 1):,.0f} times ({total:,} bytes from "
                                              f"{packed_bytes:,} at least)", where)
        if total > max_bytes:
            raise limits.BUNDLE_BYTES.refusal(f"over {max_bytes:,} bytes (its headers say)", where)


def refuse_impossible(attempts: list[dict], bundle: Path, fix: str) -> None:
    """An attempt stored ``ok`` with a figure no run can measure (figures.impossible: negative or non-finite rates,
    MFU over 100 %, ...) is refused as a log import refuses it; its row and its record are both read."""
    for a in attempts:
        if "ok" not in (a.get("status"), (a.get("record") or {}).get("status")):
            continue
        for metrics in (a.get("metrics"), (a.get("record") or {}).get("metrics")):
            problems = impossible(metrics) if isinstance(metrics, dict) else []
            if problems:
                raise UserError(f"{bundle}: {str(a.get('case_name'))[:100]} round {a.get('round')} is stored ok with "
                                f"impossible figure(s): {'; '.join(problems)[:500]}; nothing was imported",
                                fix)


def judged_end(target: Path, run_id: str, source: str, status: object) -> Optional[str]:
    """A run whose summary.json is there but empty or unreadable did not end whole: ``aborted``, as the run's
    own store judges it (recovery.summary_state), whatever status the sender's row says. None: as sent."""
    if source != "accelbench":
        return None
    state, why = summary_state(target, run_id)
    return f"judged aborted on import: {why} (the bundle's row said {status!r})" \
        if state == "unreadable" else None
