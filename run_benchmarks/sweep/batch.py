"""Max-batch search: the largest micro batch that fits, by doubling until out-of-memory, then bisection.

``try_size(size)`` runs (or looks up) one attempt and says what it ended as; only ``ok`` fits and only
``oom`` does not. Any other ending (a crash, a deadline, unsupported) says nothing about memory, so the
search stops there and says why instead of guessing. Sizes are tried at most once each.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional


@dataclass
class SearchResult:
    largest: Optional[int]  # the largest size that ran ok (None: not even the first)
    tried: list[tuple[int, str]] = field(default_factory=list)  # (size, status) in the order tried
    stopped: str = ""  # why the search ended early: another status than ok/oom, or the upper limit

    @property
    def complete(self) -> bool:
        return not self.stopped


def search_max_batch(try_size: Callable[[int], str], limit: int = 1024, start: int = 1) -> SearchResult:
    result = SearchResult(None)
    seen: dict[int, str] = {}

    def fits(size: int) -> Optional[bool]:
        if size not in seen:
            seen[size] = try_size(size)
            result.tried.append((size, seen[size]))
        status = seen[size]
        if status not in ("ok", "oom"):
            result.stopped = f"micro batch {size} ended {status}: not a memory answer, search stopped"
            return None
        return status == "ok"

    low, high, size = 0, None, start
    while size <= limit:
        verdict = fits(size)
        if verdict is None:
            return _done(result, low)
        if not verdict:
            high = size
            break
        low, size = size, size * 2
    if high is None:
        result.stopped = f"micro batch {low} still fits at the search's limit ({limit}); raise --max-batch-limit"
        return _done(result, low)
    while high - low > 1:
        middle = (low + high) // 2
        verdict = fits(middle)
        if verdict is None:
            return _done(result, low)
        low, high = (middle, high) if verdict else (low, middle)
    return _done(result, low)


def _done(result: SearchResult, low: int) -> SearchResult:
    result.largest = low or None
    return result
