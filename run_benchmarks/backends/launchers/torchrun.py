"""torchrun (``python -m torch.distributed.run``): one agent per node starts its ranks and keeps each rank's
stdout and stderr apart under ``--log-dir``."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Optional

from training.contract.names import WORKER_MODULE

from run_benchmarks.backends.launchers.base import Launcher, NodeLaunch
from run_benchmarks.results.worker_logs.rank_files import RankLogs

LOG_FOLDER = "torchrun"  # the agent's --log-dir, inside the node's folder; gone once the ranks are gathered


class Torchrun(Launcher):
    name = "torchrun"
    log_names = (RankLogs.STDOUT, RankLogs.STDERR)

    def argv(self, node: NodeLaunch) -> list[str]:
        # Static rendezvous on (master_addr, master_port, node_rank): no hostname lookups, so nodes
        # that share a hostname (containers with --network host) still meet; --local-addr keeps
        # each node's advertised address distinct.
        return [
            node.python, "-m", "torch.distributed.run",
            f"--nnodes={node.nnodes}",
            f"--nproc-per-node={node.nprocs_per_node}",
            f"--node-rank={node.node_rank}",
            f"--master-addr={node.master_addr}",
            f"--master-port={node.master_port}",
            f"--local-addr={node.local_addr}",
            "--max-restarts=0",
            # The agent checks its workers 10x a second by default (0.1 s). Every 0.25 s still finds an
            # exit soon after the workers end (a sweep's next point waits on it) with few wake-ups on the
            # cores being measured; 1 s cost a sweep about 1 s per point (docs/benchmarks.md).
            "--monitor-interval=0.25",
            f"--log-dir={node.log_dir / LOG_FOLDER}",
            "--redirects=3",
            "-m", WORKER_MODULE,
            "--config", str(node.worker_config),
        ]

    @staticmethod
    def _attempts(node_dir: Path) -> list[Path]:
        # torchrun writes <log-dir>/<rdzv run id>_<random>/attempt_<n>/<local rank>/std{out,err}.log
        return sorted((node_dir / LOG_FOLDER).glob("*/attempt_*"), key=lambda p: p.stat().st_mtime)

    def live_stdout(self, node_dir: Path, local_rank: int) -> Optional[Path]:
        attempts = self._attempts(node_dir)
        return attempts[-1] / str(local_rank) / "stdout.log" if attempts else None

    def gather_rank(self, node_dir: Path, rank: int, local_rank: int) -> RankLogs:
        logs = RankLogs.separate(node_dir, rank)
        for attempt in self._attempts(node_dir)[-1:]:  # --max-restarts=0: one attempt; the last if more
            for stream, target in (("stdout", logs.stdout), ("stderr", logs.stderr)):
                source = attempt / str(local_rank) / f"{stream}.log"
                if source.is_file():
                    shutil.move(source, target)
        return logs

    def tidy(self, node_dir: Path) -> None:
        shutil.rmtree(node_dir / LOG_FOLDER, ignore_errors=True)
