"""How many graphs ``torch.compile`` built after the warm-up: a compile inside a measured step is time
the benchmark did not mean to measure, so the end record says how many there were."""
from __future__ import annotations

from typing import Optional

from training.contract.spec import TrainSpec


def compiled_graphs() -> int:
    """Graphs dynamo has compiled in this process so far, recompiles included."""
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"]


class CompileCounter:
    def __init__(self, train: TrainSpec):
        self.compiling = train.compile is not None
        self.warmup_steps = train.warmup_steps
        self.steps = 0
        self.at_warmup_end: Optional[int] = None

    def step_started(self) -> None:
        if self.compiling and self.steps == self.warmup_steps:
            self.at_warmup_end = compiled_graphs()
        self.steps += 1

    def after_warmup(self) -> Optional[int]:
        """None when not compiling, or before any measured step."""
        if self.at_warmup_end is None:
            return None
        return compiled_graphs() - self.at_warmup_end
