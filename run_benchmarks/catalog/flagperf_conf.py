"""FlagPerf's run.py settings, ``training/run_benchmarks/config/test_conf.py`` and ``cluster_conf.py``, read
without running them, and what each key becomes.

Both files are parsed as the extern ``.py`` configs are (``flagperf_config``: plain assignments, nothing
imported or called), plus what FlagPerf's own ``test_conf.py`` writes: a name of a key assigned above in the
same file, and ``+`` of strings (``FLAGPERF_LOG_PATH = FLAGPERF_PATH + "/result/"``). Every key is in ``KEYS``:
mapped onto the run, checked against it, or ignored with why; any other key is refused with the nearest known
one, so a typo never passes. Relative paths resolve against ``training/run_benchmarks/``, where FlagPerf reads
them. README, "FlagPerf's run.py", has the table.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from run_benchmarks.catalog import casename, flagperf_config
from run_benchmarks.catalog.flagperf_config import Assigned
from run_benchmarks.errors import UserError

TEST_CONF, CLUSTER_CONF = "test_conf.py", "cluster_conf.py"
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


@dataclass(frozen=True)
class Key:
    file: str  # TEST_CONF or CLUSTER_CONF
    kind: str  # mapped | checked | ignored
    means: str  # what it becomes, or why it is ignored


KEYS: dict[str, Key] = {
    "VENDOR": Key(TEST_CONF, "checked", "the vendor whose vendor.yaml declares each case's hardware (as start_task's "
                                        "--vendor)"),
    "ACCE_CONTAINER_OPT": Key(TEST_CONF, "ignored", "the container's options are the vendor's (frameworks."
                                                    "<framework>.container in vendors/<vendor>/vendor.yaml): "
                                                    "accelbench starts containers through the Docker SDK, not a "
                                                    "docker command line"),
    "ACCE_VISIBLE_DEVICE_ENV_NAME": Key(TEST_CONF, "checked", "the accelerator kind's visible-devices variable (as "
                                                              "--visible_dev_env; \"\" for a kind without one)"),
    "PIP_SOURCE": Key(TEST_CONF, "ignored", "the image is built from the vendor's Dockerfile (vendors/<vendor>/"
                                            "docker/), whose wheels accelbench downloads on this machine"),
    "FLAGPERF_PATH": Key(TEST_CONF, "ignored", "where FlagPerf is deployed on each host; accelbench copies its own "
                                               "code to each SSH host's work_root (a --cluster file sets it). Other "
                                               "keys may name it"),
    "FLAGPERF_LOG_PATH": Key(TEST_CONF, "mapped", "the log root: each run's folder goes under it (as --log-root; "
                                                  "--log-root on the command line wins)"),
    "FLAGPERF_LOG_LEVEL": Key(TEST_CONF, "checked", f"one of {', '.join(LOG_LEVELS)}; accelbench has one output "
                                                    "level (--dry-run shows every launcher argv and variable)"),
    "SHM_SIZE": Key(TEST_CONF, "ignored", "the container's shared memory is the vendor's "
                                          "(frameworks.<framework>.container.shm_size in vendor.yaml)"),
    "CLEAR_CACHES": Key(TEST_CONF, "ignored", "accelbench does not drop the hosts' page caches (root on every host); "
                                              "each round's contention and noise are measured and reported instead"),
    "CASES": Key(TEST_CONF, "mapped", "the cases run, each with its data: case name (its 6th field the repeat) -> "
                                      "the data folder (data.source and data.path, as --data_dir); None or \"\": "
                                      "the case's own data"),
    "HOSTS": Key(CLUSTER_CONF, "mapped", "the nodes' hosts, in node order (as --hosts): 127.0.0.1/localhost is "
                                         "this machine (local processes), any other is reached over SSH"),
    "SSH_PORT": Key(CLUSTER_CONF, "mapped", "the SSH port of every host but this machine"),
    "MASTER_PORT": Key(CLUSTER_CONF, "mapped", "the rendezvous port of every round (default: a free port per "
                                               "round)"),
    "HOSTS_PORTS": Key(CLUSTER_CONF, "ignored", "the ports of FlagPerf's TensorFlow workers; accelbench runs no "
                                                "TensorFlow"),
}


@dataclass(frozen=True)
class ConfCase:
    text: str  # the case name as CASES writes it
    data: Optional[Path]  # the data folder, resolved; None: the case's own data
    where: str  # file:line


@dataclass
class FlagPerfConf:
    """The two files, typed, with where each key was said (for messages) and a note per key."""

    test_conf: Path
    cluster_conf: Path
    cases: list[ConfCase]
    hosts: list[str] = field(default_factory=list)
    ssh_port: int = 22
    master_port: Optional[int] = None
    vendor: Optional[str] = None
    visible_env: Optional[str] = None
    log_path: Optional[Path] = None
    log_level: Optional[str] = None
    where: dict[str, str] = field(default_factory=dict)  # key -> file:line
    notes: list[str] = field(default_factory=list)


def _read(path: Path) -> dict[str, Assigned]:
    if not path.is_file():
        raise UserError(f"{path}: file not found", f"write FlagPerf's {path.name} there (README, \"FlagPerf's "
                                                   "run.py\", lists its keys)")
    assigned = flagperf_config.read(path, names=True)
    for name, item in assigned.items():
        key = KEYS.get(name)
        if key is None or key.file != path.name:
            known = [k for k, v in KEYS.items() if v.file == path.name]
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            elsewhere = f" (it belongs in {key.file})" if key else ""
            raise UserError(f"{path}:{item.line}: unknown key {name!r}{elsewhere}",
                            (f"did you mean {close[0]!r}? " if close else "")
                            + f"{path.name} holds {', '.join(known)} (README, \"FlagPerf's run.py\")")
    return assigned


def _text(item: Assigned, name: str, where: str, empty: bool = False) -> str:
    if not isinstance(item.value, str) or not (empty or item.value.strip()):
        raise UserError(f"{where}: {name} = {item.value!r}: expected a{'' if empty else ' non-empty'} string",
                        f"e.g. {name} = \"...\"")
    return item.value.strip()


def _port(item: Assigned, name: str, where: str) -> int:
    value = item.value
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise UserError(f"{where}: {name} = {item.value!r}: not a port",
                        f"a port from 1 to 65535, e.g. {name} = \"22\"")
    return value


def _path(text: str, folder: Path) -> Path:
    path = Path(text).expanduser()
    return (path if path.is_absolute() else folder / path).resolve()


def _cases(item: Assigned, where: str, folder: Path) -> list[ConfCase]:
    if not isinstance(item.value, dict) or not item.value:
        raise UserError(f"{where}: CASES = {item.value!r}: expected a dict of case name -> data folder, with at "
                        "least one case", 'e.g. CASES = {"gpt3_6.7B:paddle_2.5.1:A100:1:8:1": "/raid/dataset/gpt-3/"}')
    out = []
    for text, data in item.value.items():
        if not isinstance(text, str):
            raise UserError(f"{where}: CASES key {text!r}: expected a case name", f"e.g. \"{casename.EXAMPLE}:1\"")
        try:
            casename.parse(text)
        except UserError as exc:
            raise UserError(f"{where}: CASES: {exc.message}", exc.fix) from None
        if data is not None and not isinstance(data, str):
            raise UserError(f"{where}: CASES[{text!r}] = {data!r}: expected the data folder as a string",
                            "a path, or None for the case's own data")
        out.append(ConfCase(text, _path(data, folder) if data and data.strip() else None, where))
    return out


def read(folder: Path) -> FlagPerfConf:
    """``folder``: training/run_benchmarks/, holding config/; relative paths in the files resolve against it."""
    test_path, cluster_path = folder / "config" / TEST_CONF, folder / "config" / CLUSTER_CONF
    test, cluster = _read(test_path), _read(cluster_path)
    where = {name: f"{test_path}:{item.line}" for name, item in test.items()}
    where |= {name: f"{cluster_path}:{item.line}" for name, item in cluster.items()}
    if "CASES" not in test:
        raise UserError(f"{test_path}: CASES is not set", 'e.g. CASES = {"gpt3_6.7B:paddle_2.5.1:A100:1:8:1": '
                                                           '"/raid/dataset/gpt-3/"}')
    if "HOSTS" not in cluster:
        raise UserError(f"{cluster_path}: HOSTS is not set", 'e.g. HOSTS = ["127.0.0.1"] for this machine')
    conf = FlagPerfConf(test_path, cluster_path, _cases(test["CASES"], where["CASES"], folder), where=where)
    hosts = cluster["HOSTS"].value
    if not isinstance(hosts, (list, tuple)) or not hosts or not all(isinstance(h, str) for h in hosts):
        raise UserError(f"{where['HOSTS']}: HOSTS = {hosts!r}: expected a list of host names or addresses",
                        'e.g. HOSTS = ["10.1.2.2", "10.1.2.3"] (["127.0.0.1"] for this machine)')
    conf.hosts = [h.strip() for h in hosts]
    if "SSH_PORT" in cluster:
        conf.ssh_port = _port(cluster["SSH_PORT"], "SSH_PORT", where["SSH_PORT"])
    if "MASTER_PORT" in cluster:
        conf.master_port = _port(cluster["MASTER_PORT"], "MASTER_PORT", where["MASTER_PORT"])
    if "VENDOR" in test:
        conf.vendor = _text(test["VENDOR"], "VENDOR", where["VENDOR"])
    if "ACCE_VISIBLE_DEVICE_ENV_NAME" in test:
        conf.visible_env = _text(test["ACCE_VISIBLE_DEVICE_ENV_NAME"], "ACCE_VISIBLE_DEVICE_ENV_NAME",
                                 where["ACCE_VISIBLE_DEVICE_ENV_NAME"], empty=True)
    if "FLAGPERF_LOG_PATH" in test:
        conf.log_path = _path(_text(test["FLAGPERF_LOG_PATH"], "FLAGPERF_LOG_PATH", where["FLAGPERF_LOG_PATH"]),
                              folder)
    if "FLAGPERF_LOG_LEVEL" in test:
        level = _text(test["FLAGPERF_LOG_LEVEL"], "FLAGPERF_LOG_LEVEL", where["FLAGPERF_LOG_LEVEL"])
        if level.lower() not in LOG_LEVELS:
            raise UserError(f"{where['FLAGPERF_LOG_LEVEL']}: FLAGPERF_LOG_LEVEL = {level!r}: not a log level",
                            f"one of {', '.join(LOG_LEVELS)}")
        conf.log_level = level
    for name in (*test, *cluster):
        if KEYS[name].kind == "ignored":
            conf.notes.append(f"{name} ({where[name]}): ignored: {KEYS[name].means}")
    return conf

