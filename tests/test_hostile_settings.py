"""Settings, hosts and logs that do not fit (issue 43), through the CLI in this process: each refused with exit 2
and one message naming the flag or file, the key and the fix, or stored as what it is; never a traceback, never
a command run (inputs that could name one carry a marker command), nothing written outside the test's folders.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from run_benchmarks.results.checks import loss_reference
from run_benchmarks.results.store.store import ResultStore

from .conftest import write
from .hostile import Outside, refused
from .infra.cleans import clean_turn
from .test_importers import megatron_line, stored, titan_line
from .test_loss_reference import reference_curve
from .test_results import document, fill

CASE = "gpt2_tiny:torch:cpu:1:1"
DIGITS = "9" * 5000


@pytest.fixture
def outside(tmp_path):
    look = Outside(tmp_path)
    yield look
    look.unchanged()


def marker_in(tmp_path: Path) -> tuple[Path, str]:
    marker = tmp_path / "MARKER"
    return marker, f"$(touch {marker})"


# ---------------------------------------------------------------- --set values


@pytest.mark.parametrize("command", ["run", "import"])
def test_a_5000_digit_set_is_refused_without_a_traceback(accelbench, tmp_path, outside, command):
    log = write(tmp_path / "titan.log", titan_line(5, 1, 12.25, 50.5, 3000, 1.0, 1.0))
    argv = ["run", CASE, "--dry-run"] if command == "run" else \
        ["import", log, "--format", "torchtitan", "--case-name", CASE, "--db", tmp_path / "r.db"]
    err = refused(accelbench(*argv, "--set", f"model.seq_len={DIGITS}"), "--set model.seq_len=999",
                  "(5,014 characters)", "a number no setting can take", "4300 digits")
    assert DIGITS not in err  # the value is clipped where it is named
    assert not (tmp_path / "r.db").exists()


@pytest.mark.parametrize("value", ["true", "yes", "on"])
def test_a_boolean_is_not_a_number(accelbench, outside, value):
    refused(accelbench("run", CASE, "--dry-run", "--set", f"model.seq_len={value}"),
            f"--set model.seq_len={value}: model.seq_len: true is a boolean, not a number", "give model.seq_len a number")


# ---------------------------------------------------------------- FlagPerf .py configs too deep for Python


@pytest.mark.parametrize("text", ["x = " + "-" * 300_000 + "1\n", "x = " + "2**" * 100_000 + "2\n",
                                  "x = " + "-" * 300_000 + "__import__('os').system('touch {marker}')\n"],
                         ids=["unary-minus", "power-tower", "minus-then-a-call"])
def test_a_py_config_too_deep_for_the_parser_says_why(accelbench, tmp_path, outside, text):
    marker, _ = marker_in(tmp_path)
    config = write(tmp_path / "config_TP1PP1SH1SP1cpux1x1.py", text.replace("{marker}", str(marker)))
    err = refused(accelbench("run", CASE, "--dry-run", "--extern-config", config), f"{config}: not a FlagPerf config: ",
                  "nested deeper than Python's parser takes")
    assert "not a FlagPerf config: \n" not in err and not marker.exists()


# ---------------------------------------------------------------- tolerances that pass anything


@pytest.fixture
def stored_run(tmp_path):
    db = tmp_path / "r.db"
    fill(db, [document("r1", "gpt2_tiny", "torch", 0.5)])
    return db


@pytest.mark.parametrize("band, says", [("{value: 100, upper: .inf}", "upper"), ("{value: 100, upper: 1e308}", "upper"),
                                        ("{value: .inf}", "value"), ("{value: 100, lower: 2}", "lower")],
                         ids=["upper-inf", "upper-1e308", "value-inf", "lower-past-zero"])
def test_a_reference_tolerance_that_passes_anything_is_refused(accelbench, root, stored_run, outside, band, says):
    path = write(root / "cases/gpt2_tiny/references.yaml",
                 f"references:\n  - hardware: cpu\n    figures:\n      tokens_per_s_per_device: {band}\n")
    refused(accelbench("report", "r1", "--check", "--root", root, "--db", stored_run), str(path),
            f"tokens_per_s_per_device.{says}", fix="1e308" in band)  # the bound's refusal names its fix


@pytest.mark.parametrize("spread", [".inf", "1.0e+300", ".nan"])
def test_a_loss_reference_of_infinite_spread_is_refused(accelbench, root, stored_run, outside, spread):
    text = loss_reference.dump_yaml(loss_reference.LossReferenceFile(curves=[reference_curve()]))
    first = text.index("std:\n") + len("std:\n")
    line_end = text.index("\n", first)
    path = write(root / "cases/gpt2_tiny/loss_reference.yaml", text[:first] + f"  - {spread}" + text[line_end:])
    refused(accelbench("report", "r1", "--check", "--root", root, "--db", stored_run), str(path), "curves.0",
            "a band that wide passes any curve" if spread == "1.0e+300" else "must be finite numbers", fix=False)


# ---------------------------------------------------------------- hosts that do not fit


@pytest.mark.parametrize("hosts, says", [
    ("127.0.0.1,127.0.0.1", "2 hosts for a case of 1 node(s)"),
    ("999.999.999.999", "'999.999.999.999' is not an IPv4 address"),
    ("0.0.0.0", "'0.0.0.0' is the unspecified address"),
    ("224.0.0.1", "a multicast address"),
    ("10.0.0.1,$(touch {marker})", "expected host names or addresses, got ['10.0.0.1', '$(touch'"),
])
def test_hosts_that_do_not_fit_are_refused_at_the_dry_run(accelbench, tmp_path, outside, hosts, says):
    marker, _ = marker_in(tmp_path)
    refused(accelbench("--case_name", CASE, "--hosts", hosts.replace("{marker}", str(marker)), "--dry-run",
                       entry="start_task"), "--hosts", says)
    assert not marker.exists()


@pytest.mark.parametrize("address, says", [("999.999.999.999", "is not an IPv4 address"),
                                           ("0.0.0.0", "is the unspecified address"),
                                           ("-oProxyCommand=touch {marker}", "is not a host name or IP address")])
def test_a_cluster_files_host_address_that_names_no_host_is_refused(accelbench, tmp_path, outside, address, says):
    marker, _ = marker_in(tmp_path)
    cluster = write(tmp_path / "cluster.yaml", f"hosts:\n  - {{name: box, backend: ssh, address: "
                                               f"'{address.replace('{marker}', str(marker))}'}}\n")
    refused(accelbench("run", CASE, "--dry-run", "--cluster", cluster), f"{cluster}: hosts.0.address", says,
            "give a host name or the host's IP address", fix=False)
    assert not marker.exists()


def test_a_local_hosts_address_is_checked_at_preflight_as_hosts_is(accelbench, tmp_path, outside):
    """10.255.255.1 is no address of this machine: a local node's launchers would meet nowhere."""
    cluster = write(tmp_path / "cluster.yaml", "hosts:\n  - {name: box, address: 10.255.255.1}\n")
    assert accelbench("run", CASE, "--dry-run", "--cluster", cluster).returncode == 0  # the plan reads no host
    refused(accelbench("run", CASE, "--cluster", cluster), "host box: address '10.255.255.1' is not an address of "
                                                           "this machine", "backend: ssh for another machine")
    assert not (tmp_path / "logs").exists()


@pytest.mark.parametrize("folder, says", [("/", "the root of the file system"), ("/etc", "the system folder /etc"),
                                          ("/usr/lib/bench", "inside the system folder /usr")])
@pytest.mark.parametrize("scheduler", ["kubernetes", "slurm"])
def test_a_shared_dir_that_is_a_system_folder_is_refused(accelbench, tmp_path, outside, folder, says, scheduler):
    section = ("kubernetes: {namespace: bench, image: reg.example/t:1, shared_claim: c, shared_dir: %s}" if
               scheduler == "kubernetes" else "slurm: {partition: debug, shared_dir: %s}") % folder
    cluster = write(tmp_path / "cluster.yaml", f"scheduler: {scheduler}\n{section}\n")
    refused(accelbench("run", CASE, "--dry-run", "--cluster", cluster), str(cluster), f"shared_dir {folder!r} is "
            f"{says}", "give a folder of its own", fix=False)


def test_clean_fails_when_an_engine_does_not_answer_and_clips_its_url(accelbench, tmp_path, outside):
    marker, command = marker_in(tmp_path)
    url = f"unix://{tmp_path}/{command}-" + "x" * 100_000 + ".sock"
    cluster = write(tmp_path / "c.yaml", "hosts: [{name: h}]\n")
    with clean_turn():
        done = accelbench("clean", "--docker-host", url, "--cluster", cluster)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert " characters): could not reach the Docker engine" in done.stdout
    assert "accelbench: error: could not clean" in done.stderr and "its Docker engine did not answer" in done.stderr
    assert len(done.stdout) + len(done.stderr) < 5000 and not marker.exists()


# ---------------------------------------------------------------- logs whose figures cannot be


def import_log(accelbench, db: Path, log: Path, fmt: str, run_id: str, *extra: str):
    done = accelbench("import", log, "--format", fmt, "--db", db, "--run-id", run_id, *extra)
    assert "Traceback" not in done.stdout + done.stderr
    return done


def test_a_21_digit_global_batch_is_failed_and_the_run_ends(accelbench, tmp_path, outside):
    """It was an OverflowError in SQLite, and the run row stayed 'running' with no attempt for ever."""
    log = write(tmp_path / "megatron.log", megatron_line("03:20", 10, 20000.0, 280.0, 3.0) + megatron_line(
        "05:40", 20, 14000.0, 400.0, 2.5).replace("global batch size:   512", "global batch size: " + "1" * 21))
    done = import_log(accelbench, tmp_path / "r.db", log, "megatron", "batch", "--nnodes", "1", "--nprocs-per-node", "8")
    assert done.returncode == 1 and "megatron.log: failed — impossible figure(s): samples/s" in done.stdout
    row = stored(tmp_path / "r.db", "batch")
    assert row["status"] == "failed" and "1.11111e+20 samples per step" in row["reason"]
    assert row["metrics"]["samples_per_step"] == pytest.approx(int("1" * 21))  # the log's figure, in the record
    with ResultStore(tmp_path / "r.db") as store:
        assert store.run("batch")["status"] == "done"


def test_a_step_of_1e_300_ms_without_a_case_is_refused_by_a_bound_on_any_device(accelbench, tmp_path, outside):
    log = write(tmp_path / "megatron.log", megatron_line("03:20", 10, 20000.0, 280.0, 3.0) + megatron_line(
        "05:40", 20, 14000.0, 400.0, 2.5).replace("(ms): 14000.0", "(ms): 1e-300"))
    done = import_log(accelbench, tmp_path / "r.db", log, "megatron", "tiny", "--nnodes", "1", "--nprocs-per-node", "8")
    assert done.returncode == 1, done.stdout
    row = stored(tmp_path / "r.db", "tiny")
    assert row["status"] == "failed" and "step time (median) 1e-303 s is shorter than 1e-06 s" in row["reason"]
    assert "samples/s 5.12e+305 (512 samples per step, 8 device(s): 6.4e+304 per device" in row["reason"]
    assert "5.12e+305" not in done.stdout.split("—")[0]  # a failed import's headline shows no figure


def test_stamps_that_run_backwards_give_no_wall_time(accelbench, tmp_path, outside):
    log = write(tmp_path / "titan.log", titan_line(40, 1, 12.25, 50.5, 3000, 1.0, 1.0)
                + titan_line(17, 10, 9.5, 52.31, 6000, 1.0, 1.0) + titan_line(14, 20, 9.5, 52.31, 6000, 1.0, 1.0))
    done = import_log(accelbench, tmp_path / "r.db", log, "torchtitan", "back", "--nnodes", "1",
                      "--nprocs-per-node", "8")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "time stamps run backwards (2025-01-10T12:00:17 after 2025-01-10T12:00:40): no wall time" in done.stderr
    row = stored(tmp_path / "r.db", "back")
    assert row["status"] == "ok" and row["wall_time_s"] is None and row["started_at"] is None
