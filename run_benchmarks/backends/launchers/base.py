"""The launcher interface: one node's argv, the rank logs it leaves, and the errors of ranks that never met."""
from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import ClassVar, Optional, Union

from run_benchmarks.registry import Registry, instance_of
from run_benchmarks.results.worker_logs.rank_files import RankLogs

# A rank that could not connect its collective backend at start-up did not run the benchmark: the round is
# retried (rounds.START_RETRIES) instead of recorded. Gloo's full-mesh connect sometimes meets a peer that is
# not listening yet (seen with 4 Paddle ranks on 2 cores: "Connection refused", or a timeout). The rendezvous
# store's master port taken by another process since it was chosen (torch's TCPStore: "failed to listen on
# any local network address ... EADDRINUSE") is one too: no rank ever met another.
RENDEZVOUS_ERRORS = re.compile(r"(?i)gloo.*(connection refused|connectfullmesh|timed? ?out)"
                               r"|connectfullmesh failed|gloo.*connect.*(refused|reset)"
                               r"|server socket has failed to listen on any local network address.*eaddrinuse")


@dataclass(frozen=True)
class NodeLaunch:
    """What one node's launcher must know, as its host sees the paths."""

    python: str
    nnodes: int
    nprocs_per_node: int
    node_rank: int
    master_addr: str
    master_port: Union[int, str]  # a number, or training.contract.ports.PLACEHOLDER: chosen when the round starts
    local_addr: str
    log_dir: Union[Path, PurePosixPath]
    worker_config: Union[Path, PurePosixPath]
    code_root: Union[Path, PurePosixPath]  # where this checkout's training/ is on the host (or in the container)


def global_rank(node_rank: int, nprocs_per_node: int, local_rank: int) -> int:
    """A rank's place in the world: nodes fill ranks in node-rank order, ``nprocs_per_node`` each."""
    return node_rank * nprocs_per_node + local_rank


class Launcher(ABC):
    name: ClassVar[str]
    log_names: ClassVar[tuple[str, ...]]  # what gather_rank_logs leaves in a node's folder, rank as <N>
    start_errors: ClassVar[re.Pattern] = RENDEZVOUS_ERRORS

    @abstractmethod
    def argv(self, node: NodeLaunch) -> list[str]:
        """The node's launcher command, every value one word (never a shell line)."""

    @abstractmethod
    def live_stdout(self, node_dir: Path, local_rank: int) -> Optional[Path]:
        """Where a running rank's stdout is being written, once the launcher has made it."""

    @abstractmethod
    def gather_rank(self, node_dir: Path, rank: int, local_rank: int) -> RankLogs:
        """Move one rank's output from where the launcher left it to its ``log_names``."""

    def tidy(self, node_dir: Path) -> None:
        """After every rank was gathered: what else the launcher left (its own folders, its own log)."""

    def gather_rank_logs(self, node_dir: Path, node_rank: int, nprocs_per_node: int) -> list[RankLogs]:
        """Every rank of the node, gathered into the node's folder, in rank order."""
        out = [self.gather_rank(node_dir, global_rank(node_rank, nprocs_per_node, local), local)
               for local in range(nprocs_per_node)]
        self.tidy(node_dir)
        return out

    def start_error_in(self, lines: list[str]) -> Optional[str]:
        """The first line that says the ranks never connected, or None."""
        return next((line for line in lines if self.start_errors.search(line)), None)


LAUNCHERS: Registry[Launcher] = Registry("launcher", make=instance_of)
