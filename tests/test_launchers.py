"""Launchers as an axis of their own (run_benchmarks/backends/launchers/): each framework names its launcher and
declares nothing of its runtime; a launcher's argv, where it leaves each rank's output (gathered into one layout
every reader finds, ranks numbered by one formula) and its start errors. In-process, on synthetic log trees laid
out as torchrun and paddle.distributed.launch lay them out."""
from __future__ import annotations

from pathlib import Path

from run_benchmarks.backends import launchers
from run_benchmarks.backends.launchers.base import Launcher, global_rank
from run_benchmarks.catalog import frameworks
from run_benchmarks.results.worker_logs.rank_files import RankLogs, gathered

from .conftest import write


def test_each_framework_names_a_registered_launcher_and_the_catalog_only_declares():
    assert {name: frameworks.get(name).launcher for name in frameworks.names()} == {
        "paddle": "paddle.distributed.launch", "torch": "torchrun"}
    for name in frameworks.names():
        assert isinstance(launchers.get(frameworks.get(name).launcher), Launcher)
    runtime = ("launcher_argv", "live_stdout", "gather_rank_logs", "start_error_in", "rank_log_names")
    assert not any(hasattr(frameworks.Framework, attribute) for attribute in runtime)


def test_torchruns_rank_logs_are_gathered_from_its_last_attempt_with_the_ranks_numbered_by_node(tmp_path):
    torchrun = launchers.get("torchrun")
    node = tmp_path / "n1_noderank1"
    for local in range(2):
        write(node / "torchrun" / "run_x" / "attempt_0" / str(local) / "stdout.log", f"out {local}\n")
        write(node / "torchrun" / "run_x" / "attempt_0" / str(local) / "stderr.log", f"err {local}\n")
    assert torchrun.live_stdout(node, 1) == node / "torchrun" / "run_x" / "attempt_0" / "1" / "stdout.log"
    logs = torchrun.gather_rank_logs(node, node_rank=1, nprocs_per_node=2)
    assert [(r.rank, r.stdout.name, r.stderr.name) for r in logs] == [
        (2, "rank2.stdout.log", "rank2.stderr.log"), (3, "rank3.stdout.log", "rank3.stderr.log")]
    assert logs[1].stdout.read_text() == "out 1\n" and logs[1].stderr.read_text() == "err 1\n"
    assert not (node / "torchrun").exists()  # its own folders go once gathered
    assert gathered(tmp_path) == logs


def test_paddles_merged_rank_logs_and_its_own_log_are_gathered(tmp_path):
    paddle = launchers.get("paddle.distributed.launch")
    node = tmp_path / "n0_noderank0"
    write(node / "paddle" / "workerlog.0", "both streams\n")
    write(node / "paddle" / "default.1234.log", "the launcher's own\n")
    assert paddle.live_stdout(node, 0) == node / "paddle" / "workerlog.0" and paddle.live_stdout(node, 1) is None
    (log,) = paddle.gather_rank_logs(node, node_rank=0, nprocs_per_node=1)
    assert log == RankLogs(0, node / "rank0.log", node / "rank0.log") and log.stdout.read_text() == "both streams\n"
    assert (node / "paddle-launcher.log").read_text() == "the launcher's own\n" and not (node / "paddle").exists()
    assert paddle.log_names == ("rank<N>.log (stdout and stderr)", "paddle-launcher.log")
    assert gathered(tmp_path) == [log]


def test_one_rank_formula_for_every_launcher():
    assert [global_rank(node, 4, local) for node in range(2) for local in range(4)] == list(range(8))


def test_a_launchers_argv_fills_the_nodes_place_and_every_value_is_one_word(tmp_path):
    odd = Path(tmp_path / "dir with $(space)")
    node = launchers.NodeLaunch(python="python3", nnodes=2, nprocs_per_node=2, node_rank=1, master_addr="10.0.0.1",
                                master_port=29400, local_addr="10.0.0.2", log_dir=odd, worker_config=odd / "c.json",
                                code_root=odd)
    argv = launchers.get("torchrun").argv(node)
    assert argv[:3] == ["python3", "-m", "torch.distributed.run"] and f"--log-dir={odd}/torchrun" in argv
    assert {"--node-rank=1", "--master-addr=10.0.0.1", "--master-port=29400", "--local-addr=10.0.0.2"} <= set(argv)
    assert argv[-2:] == ["--config", str(odd / "c.json")]
