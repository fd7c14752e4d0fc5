"""When a round counts as contended: the limits of test_conf's ``contention:``, changed by ``--set contention.KEY=V``.

Each limit is compared with the figure the node's monitor measured over the measured steps
(execute/contention.py); past any of them the round is contended, and no command judges it. A limit set to
null judges nothing on its figure. The defaults suit a machine the run should have to itself; a machine that
is shared on purpose (a CI runner with sibling jobs) sets what it expects of itself.
"""
from __future__ import annotations

from typing import Optional, Sequence

from pydantic import Field, NonNegativeFloat, PositiveInt, ValidationError

from run_benchmarks.catalog.config import Strict, parse_assignment
from run_benchmarks.errors import UserError

PREFIX = "contention."


class ContentionLimits(Strict):
    others_cpu_share: Optional[NonNegativeFloat] = Field(
        0.25, description="CPU time of processes that are not the run's own, as a share of the cores the run was "
                          "given (their CPU affinity), over the measured steps")
    steal_share: Optional[NonNegativeFloat] = Field(
        0.05, description="time the hypervisor took from the run's cores (CPU steal, /proc/stat), as a share")
    memory_pressure_share: Optional[NonNegativeFloat] = Field(
        0.10, description="time some task stalled on memory (PSI /proc/pressure/memory 'some'), as a share")
    load_per_core: Optional[NonNegativeFloat] = Field(
        None, description="the 1-minute load average per core of the machine; off by default: it counts the "
                          "run's own threads too")
    device_processes: Optional[PositiveInt] = Field(
        1, description="other processes on the run's devices (NVML's compute processes, a command monitor's "
                       "processes query) at least this many")

    def applied(self, assignments: Sequence[str], where: str = "--set") -> "ContentionLimits":
        """These limits with ``contention.KEY=VALUE`` texts applied; a bad key or value is a UserError."""
        data = self.model_dump()
        for text in assignments:
            nested = parse_assignment(text)["contention"]
            if not isinstance(nested, dict) or any(isinstance(v, dict) for v in nested.values()):
                raise UserError(f"{where} {text!r}: contention takes one key", _fix())
            data.update(nested)
            try:
                ContentionLimits.model_validate(data)
            except ValidationError as exc:
                error = exc.errors()[0]
                key = ".".join(map(str, error["loc"]))
                raise UserError(f"{where} {text!r}: contention.{key}: {error['msg']}", _fix()) from None
        return ContentionLimits.model_validate(data)


def _fix() -> str:
    keys = ", ".join(f"contention.{k}" for k in ContentionLimits.model_fields)
    return (f"e.g. --set contention.others_cpu_share=0.5 (a share of the cores) or =null to judge nothing on it; "
            f"keys: {keys}")


def split(assignments: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the ``contention.*`` texts, the workload's texts) of a command line's ``--set``s."""
    ours = [a for a in assignments if a.strip().startswith(PREFIX)]
    return ours, [a for a in assignments if a not in ours]
