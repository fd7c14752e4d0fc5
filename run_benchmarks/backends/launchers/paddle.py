"""``python -m paddle.distributed.launch``, one launcher per node; never hand-built endpoints. It writes one
merged stdout+stderr per rank (``workerlog.<local rank>``) and a log of its own."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Optional

from training.contract.names import WORKER_SCRIPT

from run_benchmarks.backends.launchers.base import Launcher, NodeLaunch
from run_benchmarks.results.worker_logs.rank_files import RankLogs

LOG_FOLDER = "paddle"  # the launcher's --log_dir, inside the node's folder; gone once the ranks are gathered
LAUNCHER_LOG = "paddle-launcher.log"  # the launcher's own log (default.*.log), kept


class PaddleLaunch(Launcher):
    name = "paddle.distributed.launch"
    log_names = (f"{RankLogs.MERGED} (stdout and stderr)", LAUNCHER_LOG)

    def argv(self, node: NodeLaunch) -> list[str]:
        argv = [
            node.python, "-m", "paddle.distributed.launch",
            f"--nnodes={node.nnodes}",
            f"--nproc_per_node={node.nprocs_per_node}",
            f"--log_dir={node.log_dir / LOG_FOLDER}",
            "--job_id=accelbench",
            "--max_restart=0",
        ]
        if node.nnodes > 1:
            # The master's store on (master_addr, master_port); --rank fixes this node's place and --host the
            # address it advertises (containers with --network host share one hostname).
            argv += [f"--master={node.master_addr}:{node.master_port}", f"--rank={node.node_rank}",
                     f"--host={node.local_addr}"]
        # The launcher takes a script, not a module: training/run_pretraining.py puts its root on sys.path.
        return argv + [str(node.code_root / WORKER_SCRIPT), "--config", str(node.worker_config)]

    def live_stdout(self, node_dir: Path, local_rank: int) -> Optional[Path]:
        path = node_dir / LOG_FOLDER / f"workerlog.{local_rank}"
        return path if path.is_file() else None

    def gather_rank(self, node_dir: Path, rank: int, local_rank: int) -> RankLogs:
        """Both streams of a rank point at its one merged log."""
        logs = RankLogs.merged(node_dir, rank)
        source = node_dir / LOG_FOLDER / f"workerlog.{local_rank}"
        if source.is_file():
            shutil.move(source, logs.stdout)
        return logs

    def tidy(self, node_dir: Path) -> None:
        for launcher_log in sorted((node_dir / LOG_FOLDER).glob("default.*.log")):
            shutil.move(launcher_log, node_dir / LAUNCHER_LOG)
        shutil.rmtree(node_dir / LOG_FOLDER, ignore_errors=True)
