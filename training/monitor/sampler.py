"""What every sampler of the monitor shares: the one interface (``sample()``) and how one says it cannot run.
Apart from the package (``__init__``: the registry and the openers), which the sampler modules never import."""
from __future__ import annotations

from typing import Protocol


class Unavailable(RuntimeError):
    """This sampler cannot run here; the message says why (shown as a warning with the results)."""


class ToolKilled(Unavailable):
    """The sampler's tool was killed by a signal: most often the node's stop, which reaches the monitor's
    whole tree (the tool first, sometimes) before the monitor's own SIGTERM handler runs."""


class Sampler(Protocol):
    def sample(self) -> dict: ...
