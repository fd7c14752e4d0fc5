"""Where each rank's output lies once its launcher's logs were gathered (backends/launchers/): one layout for
every launcher, so readers of a finished round (the analysis, task figures, a report's loss curve) need not know
which launcher ran it."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar


@dataclass(frozen=True)
class RankLogs:
    """One rank's gathered output in its node's folder, as every launcher leaves it (backends/launchers/):
    ``rank<N>.stdout.log`` and ``rank<N>.stderr.log``, or one ``rank<N>.log`` holding both streams where the
    launcher merges them (Paddle's)."""

    STDOUT: ClassVar[str] = "rank<N>.stdout.log"
    STDERR: ClassVar[str] = "rank<N>.stderr.log"
    MERGED: ClassVar[str] = "rank<N>.log"

    rank: int
    stdout: Path
    stderr: Path

    @classmethod
    def separate(cls, node_dir: Path, rank: int) -> "RankLogs":
        return cls(rank, node_dir / _named(cls.STDOUT, rank), node_dir / _named(cls.STDERR, rank))

    @classmethod
    def merged(cls, node_dir: Path, rank: int) -> "RankLogs":
        merged = node_dir / _named(cls.MERGED, rank)
        return cls(rank, merged, merged)


def _named(pattern: str, rank: int) -> str:
    return pattern.replace("<N>", str(rank))


_GATHERED = re.compile(r"^rank(\d+)(\.stdout)?\.log$")


def gathered(round_dir: Path, node_pattern: str = "*") -> list[RankLogs]:
    """The gathered logs of every rank in the node folders ``node_pattern`` of a round, in rank order: for
    readers of a finished round (task figures, a report's loss curve)."""
    found: dict[int, RankLogs] = {}
    for path in sorted(round_dir.glob(f"{node_pattern}/rank*.log")):
        match = _GATHERED.match(path.name)
        if match and int(match.group(1)) not in found:
            rank = int(match.group(1))
            found[rank] = (RankLogs.separate if match.group(2) else RankLogs.merged)(path.parent, rank)
    return [found[rank] for rank in sorted(found)]
