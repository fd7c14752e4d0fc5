"""Position schemes that both frameworks' models share, as plain numbers (no torch, no paddle)."""
from __future__ import annotations

import math


def alibi_slopes(n_head: int) -> list[float]:
    """Per-head ALiBi slopes (Press et al.), with the paper's interpolation for head counts not a power of 2."""
    def powers(n: int) -> list[float]:
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start ** (i + 1) for i in range(n)]

    closest = 2 ** math.floor(math.log2(n_head))
    slopes = powers(closest)
    if closest < n_head:
        slopes += powers(2 * closest)[0::2][: n_head - closest]
    return slopes
