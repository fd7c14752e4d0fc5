"""Bad and hostile inputs through the CLI: each is refused with exit 2 and one message that names the file or
flag, the key and the fix; no traceback, no log folder, no process. The CLI runs in this process (the
``accelbench`` fixture), except where its memory is watched: the YAML alias bombs run it as a process."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from .conftest import ROOT, write
from .runner import ends_with_the_test
from .test_runs import leftover_processes as processes_mentioning

CASE = "gpt2_tiny:torch:cpu:1:1"


def refused(result, *needles: str) -> str:
    """Exit 2, an accelbench error naming every needle, no traceback, and nothing started."""
    err = result.stderr
    assert result.returncode == 2, (result.returncode, result.stdout[-2000:], err[-2000:])
    assert "Traceback" not in err and "Traceback" not in result.stdout, err
    assert err.startswith("accelbench: error: "), err
    for needle in needles:
        assert needle in err, (needle, err)
    assert not result.log_root.is_dir() or not any(result.log_root.iterdir()), "a log folder was made"
    assert not processes_mentioning(result.log_root)
    return err


# ---------------------------------------------------------------- YAML aliases (billion laughs)

LAUGHS = "\n".join(
    ["  a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    + [f"  {b}: &{b} [{', '.join(['*' + a] * 10)}]" for a, b in zip("abcdefgh", "bcdefghi")])


def run_bounded(argv: list[str], cwd: Path, limit_s: float = 20, rss_limit: int = 400 * 2**20,
                env: dict | None = None):
    """Run the CLI, watching its memory: a bounded loader answers in seconds and small."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "run_benchmarks.cli", *argv], cwd=cwd, env=env,
                            preexec_fn=ends_with_the_test(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watched, peak = psutil.Process(proc.pid), 0
    try:
        while proc.poll() is None:
            try:
                peak = max(peak, watched.memory_info().rss)
            except psutil.NoSuchProcess:
                break
            assert peak < rss_limit, f"{peak / 2**20:.0f} MiB and growing"
            assert time.monotonic() - started < limit_s, "still running"
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()
    out, err = proc.communicate()
    return proc.returncode, out, err, time.monotonic() - started


@pytest.mark.parametrize("where", ["test_conf", "case", "extern", "set", "self_reference"])
def test_alias_bomb_is_refused_fast_and_small(where, root, tmp_path):
    logs = tmp_path / "logs"
    argv = ["run", CASE, "--root", str(root), "--log-root", str(logs)]
    if where == "test_conf":
        path = write(tmp_path / "test_conf.yaml", f"overrides:\n{LAUGHS}\n")
        argv += ["--test-conf", str(path)]
    elif where == "case":
        path = root / "cases/gpt2_tiny/case.yaml"
        path.write_text(path.read_text().replace("model:", f"laughs:\n{LAUGHS}\nmodel:", 1))
    elif where == "extern":
        path = write(tmp_path / "config_TP1PP1SH1SP1cpux1x1.yaml", f"train:\n  micro_batch_size: 2\n"
                                                                    f"parallel:\n{LAUGHS}\n")
        argv += ["--extern-config", str(path)]
    elif where == "set":
        path = Path("--set")
        argv += ["--set", "model={a: &a [1, 1, 1, 1, 1, 1, 1, 1], b: &b [*a, *a, *a, *a, *a, *a, *a, *a], "
                          "c: &c [*b, *b, *b, *b, *b, *b, *b, *b], d: [*c, *c, *c, *c, *c, *c, *c, *c]}"]
    else:
        path = Path("--set")
        argv += ["--set", "model=&a {n_layer: 2, x: *a}"]
    code, out, err, took = run_bounded(argv, tmp_path)
    assert code == 2, err[-2000:]
    assert "Traceback" not in err and took < 20
    assert str(path) in err and "anchor/alias" in err and "write the values out in full" in err, err
    assert not logs.exists()


def test_deeply_nested_yaml_is_refused(accelbench):
    err = refused(accelbench("run", CASE, "--set", "model=" + "[" * 500 + "]" * 500), "nested more than 32 levels")
    assert "--set" in err


# ---------------------------------------------------------------- user text is never markup


def test_markup_in_a_case_name_is_printed_as_text(accelbench):
    err = refused(accelbench("run", "gpt2_tiny[/]:torch:cpu:1:2"), "gpt2_tiny[/]", "fix:")
    assert "MarkupError" not in err


def test_markup_in_a_key_is_printed_as_text(accelbench):
    refused(accelbench("run", CASE, "--set", "model.[bold]x[/]=1"), "unknown key 'model.[bold]x[/]'")


# ---------------------------------------------------------------- paths and files


def test_log_root_that_is_a_file(accelbench, tmp_path):
    blocker = write(tmp_path / "blocker", "not a folder\n")
    result = accelbench("run", CASE, log_root=blocker)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"--log-root {blocker} is a file, not a folder" in result.stderr and "fix:" in result.stderr
    assert blocker.read_text() == "not a folder\n"
    result = accelbench("run", CASE, log_root=blocker / "runs")
    assert result.returncode == 2 and f"{blocker} is a file" in result.stderr


def test_log_root_on_a_read_only_filesystem(accelbench, tmp_path):
    if os.getuid() != 0:
        folder = tmp_path / "sealed"
        folder.mkdir()
        folder.chmod(0o555)
    else:  # root writes through permissions; /proc/sys refuses it
        folder = Path("/proc/sys")
        if os.access(folder, os.W_OK):
            pytest.skip("no folder here refuses writes to root")
    result = accelbench("run", CASE, log_root=folder / "accelbench-logs")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--log-root" in result.stderr and "is not writable" in result.stderr, result.stderr
    assert not (folder / "accelbench-logs").exists()


def test_db_that_is_a_folder(accelbench, tmp_path):
    folder = tmp_path / "db-folder"
    folder.mkdir()
    refused(accelbench("run", CASE, "--db", str(folder)), f"--db {folder} is a folder, not a file", "results.db")


def test_extends_is_a_case_name_not_a_path(accelbench, root):
    write(root / "cases/evil/case.yaml", "extends: ../../outside\n")
    refused(accelbench("run", "evil:torch:cpu:1:1", "--root", str(root)),
            "cases/evil/case.yaml: extends:", "not a path", "extends: gpt2_tiny")


def test_relative_log_root_may_not_leave_the_checkout(accelbench, tmp_path):
    conf = write(tmp_path / "test_conf.yaml", "log_root: ../../logs\n")
    refused(accelbench("run", CASE, "--test-conf", str(conf)), f"{conf}: log_root:", "leaves it", "absolute path")


def test_relative_ssh_work_root(accelbench, tmp_path):
    cluster = write(tmp_path / "cluster.yaml", "hosts:\n  - {name: far, backend: ssh, address: 192.0.2.1, "
                                               "work_root: bench}\n")
    refused(accelbench("run", CASE, "--cluster", str(cluster)), str(cluster), "work_root 'bench' must be an absolute",
            "/tmp/accelbench")


def test_missing_local_python(accelbench, tmp_path):
    cluster = write(tmp_path / "cluster.yaml", "hosts:\n  - {name: box, python: /nonexistent/bin/python3}\n")
    refused(accelbench("run", CASE, "--cluster", str(cluster)), str(cluster), "host box",
            "'/nonexistent/bin/python3' is not an executable", "hosts[].python")


# ---------------------------------------------------------------- bounds


@pytest.mark.parametrize("name, needles", [
    ("gpt2_tiny:torch_2.13:cpu:1:99999999999999999999", ["nprocs_per_node must be at most 1024", "lower"]),
    ("gpt2_tiny:torch:cpu:1:100000", ["nprocs_per_node must be at most 1024"]),
    ("gpt2_tiny:torch:cpu:5000:1", ["nnodes must be at most 4096"]),
    ("gpt2_tiny:torch:cpu:1:1:100000", ["repeat must be at most 1000"]),
    ("gpt2_tiny:torch:cpu:1:" + "9" * 5000, ["nprocs_per_node must be at most 1024"]),
    ("gpt2_tiny:torch:cpu:1:500", ["CPU worker(s) on this machine", "core(s)", "lower nprocs_per_node"]),
])
def test_case_name_bounds(accelbench, name, needles):
    refused(accelbench("run", name), *needles)


@pytest.mark.parametrize("assignment, key, limit", [
    ("train.micro_batch_size=" + "1" + "0" * 30, "train.micro_batch_size", "65536"),
    ("train.steps=" + "1" + "0" * 23, "train.steps", "10000000"),
    ("model.seq_len=" + "1" + "0" * 12, "model.seq_len", "1048576"),
    ("model.d_model=" + "1" + "0" * 12, "model.d_model", "131072"),
    ("train.gradient_accumulation_steps=" + "1" + "0" * 9, "train.gradient_accumulation_steps", "65536"),
])
def test_workload_maxima(accelbench, assignment, key, limit):
    err = refused(accelbench("run", CASE, "--set", assignment), f"--set {assignment[:20]}", key, f"at most {limit}")
    assert "fix:" in err


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf"])
def test_timeout_must_be_finite_and_positive(accelbench, value):
    refused(accelbench("run", CASE, "--timeout", value), f"--timeout {value}", "finite number of seconds above 0")


def test_explicit_empty_case_name(accelbench):
    refused(accelbench("--case_name", "", entry="start_task"), "no case named", "omit --case_name")
    refused(accelbench("run", " "), "no case named")


# ---------------------------------------------------------------- SSH hosts


def ssh_cluster(tmp_path: Path, port: int, extra: str = "") -> Path:
    known_hosts = write(tmp_path / "known_hosts", "")
    return write(tmp_path / "cluster.yaml", f"hosts:\n  - {{name: far, backend: ssh, address: 127.0.0.1, "
                                            f"port: {port}, known_hosts: {known_hosts}, connect_timeout_s: 2"
                                            f"{extra}}}\n")


def test_missing_identity_file_is_named(accelbench, tmp_path):
    key = tmp_path / "no_such_key"
    err = refused(accelbench("run", CASE, "--cluster", str(ssh_cluster(tmp_path, 1, f", identity_file: {key}"))),
                  f"identity_file {key} not found", "cluster config")
    assert "unreachable" not in err


@pytest.fixture
def silent_port():
    """A TCP port that accepts connections and never says a word (no SSH banner)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []

    def accept():
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1]
    server.close()
    for conn in held:
        conn.close()


def test_no_ssh_banner(accelbench, tmp_path, silent_port):
    started = time.monotonic()
    err = refused(accelbench("run", CASE, "--cluster", str(ssh_cluster(tmp_path, silent_port))),
                  "no SSH banner within 2 s: is sshd running on that port?")
    assert "authorized_keys" not in err and "paramiko" not in err
    assert time.monotonic() - started < 30


def test_docker_engine_that_does_not_answer(accelbench, tmp_path):
    cluster = write(tmp_path / "cluster.yaml", "hosts:\n  - {name: box, runtime: container, "
                                               f"docker_host: 'unix://{tmp_path}/no-docker.sock'}}\n")
    refused(accelbench("run", CASE, "--cluster", str(cluster)), "host box", "Docker engine", "does not answer")
