"""Times and waits of the results store: instants as the store holds them (ISO, UTC), and how long a writer
waits for another's lock before it gives up (each wait can be set from the environment)."""
from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Any, Optional

WAIT_ENV, RETRY_ENV = "ACCELBENCH_STORE_WAIT_S", "ACCELBENCH_STORE_RETRY_S"
DEFAULT_WAIT_S, DEFAULT_RETRY_S = 30.0, 120.0
SCAN_BUDGET_S = 10.0  # the row scan of the open check stops here on a very large store (quick_check is whole)
FINALIZE_WAIT_S = 2.0  # finalizing dead runs at open is a courtesy: it does not wait long for a lock


def seconds_from_env(env: str, default: float) -> float:
    try:
        return max(0.0, float(os.environ.get(env, default)))
    except ValueError:
        return default



def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def instant(text: Any) -> Optional[datetime]:
    """An ISO time as the store holds it (UTC when it names no zone); None when there is none."""
    if not isinstance(text, str) or not text:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
