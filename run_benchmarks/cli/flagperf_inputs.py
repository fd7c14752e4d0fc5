"""What FlagPerf names as accelbench's inputs: a list of host addresses with their SSH ports (start_task's
``--hosts``/``--hosts_ports``, run.py's ``HOSTS``/``SSH_PORT``) and a data folder (``--data_dir``, a ``CASES``
value). Shared by start_task's options (``flagperf.py``) and run.py's config files (``flagperf_run.py``), each
message naming where the value was said (``said``: ``--hosts`` or ``HOSTS (.../cluster_conf.py:4)``)."""
from __future__ import annotations

import re
from pathlib import Path

from training.contract.tasks import task_of

from run_benchmarks.catalog.config_files import HostSpec
from run_benchmarks.errors import UserError

LOOPBACK = {"127.0.0.1", "localhost", "::1"}  # this machine: its nodes run as local processes, without SSH
_ADDRESS = re.compile(r"^(?:[A-Za-z0-9][A-Za-z0-9.\-]*|[0-9A-Fa-f:]+)$")
_HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


def addresses_of(values: list[str], said: str) -> list[str]:
    """Host names or addresses, each checked (no shell word, no empty name)."""
    addresses = [a for a in values if a]
    if not addresses or not all(_ADDRESS.match(a) for a in addresses):
        raise UserError(f"{said}: expected host names or addresses, got {values!r}",
                        "e.g. 10.0.0.10,10.0.0.11 (127.0.0.1 for this machine)")
    return addresses


def ports_of(words: list[str], hosts: int, said: str) -> list[int]:
    """One SSH port for every host, or one per host."""
    words = [w.strip() for w in words if w.strip()]
    if not words or not all(w.isdigit() and 1 <= int(w) <= 65535 for w in words) or len(words) not in (1, hosts):
        raise UserError(f"{said}: expected one SSH port (1-65535) for every host, or one per host ({hosts})",
                        "e.g. 22")
    return [int(w) for w in words] * (hosts if len(words) == 1 else 1)


def host_specs(addresses: list[str], ports: list[int], said: str, ports_said: str | None) -> tuple[list[HostSpec],
                                                                                                    list[str]]:
    """The nodes' hosts in node order, and a note per host saying how it is reached."""
    local = [a in LOOPBACK for a in addresses]
    if any(local) and not all(local):
        raise UserError(f"{said}: {addresses[local.index(True)]} is this machine alone, which the other hosts "
                        "cannot reach as a node", "name this machine by an address the other hosts reach, e.g. "
                                                  "its IP on the cluster's network")
    specs, used, notes = [], set(), []
    for index, (address, port, is_local) in enumerate(zip(addresses, ports, local)):
        base = "localhost" if is_local else address if _HOST_NAME.match(address) else f"node{index}"
        name = base if base not in used else f"{base}-{index}"
        used.add(name)
        if is_local:
            specs.append(HostSpec(name=name, backend="local", address="127.0.0.1"))
            notes.append(f"{said} {address}: node {index} on this machine, as local processes"
                         + (f" ({ports_said} {port} is not used: no SSH to itself)" if ports_said else ""))
        else:
            specs.append(HostSpec(name=name, backend="ssh", address=address, port=port))
            notes.append(f"{said} {address}: node {index} over SSH on port {port}, its host key checked against "
                         "~/.ssh/known_hosts and never added; user, key, python and work_root are the defaults "
                         "(write a --cluster file to set them)")
    return specs, notes


def dataset_in(folder: Path, tokens: bool, said: str, remote: bool) -> str:
    """The dataset in ``folder``: the prefix of the one ``<prefix>_ids.npy`` + ``_idx.npz`` (pretraining), or
    the one ``.jsonl`` file (instruction data)."""
    if not folder.is_dir():
        raise UserError(f"{said}: {folder} is not a folder on this machine",
                        ("the dataset's name is read from the folder here: give --set data.source=tokens --set "
                         f"data.path={folder}/<prefix> instead") if remote else "point it at the folder holding the "
                        "dataset (FlagPerf's GPT-3 guide downloads gpt_en_dataset_300m_ids.npy and _idx.npz into it)")
    if tokens:
        found = sorted(str(folder / p.name.removesuffix("_ids.npy")) for p in folder.glob("*_ids.npy")
                       if (folder / p.name.replace("_ids.npy", "_idx.npz")).is_file())
        what = "<prefix>_ids.npy with its <prefix>_idx.npz"
    else:
        found, what = sorted(str(p) for p in folder.glob("*.jsonl")), "instruction .jsonl file"
    if len(found) != 1:
        listed = f"{len(found)}: {', '.join(found)}" if found else "none"
        raise UserError(f"{said}: expected one {what} in {folder}, found {listed}",
                        "name the dataset itself: --set data.path=<file or prefix> (with --set data.source=...) "
                        "instead")
    return found[0]


def data_settings(task: str, case: str, folder: Path, said: str, remote: bool) -> dict[str, str]:
    """``data.source`` and ``data.path`` for a case of ``task`` reading the dataset in ``folder``."""
    if not task_of(task).reads_data:
        raise UserError(f"{said}: case {case} (task {task}) reads no data", "leave the data folder out")
    tokens = not task_of(task).instruction
    return {"data.source": "tokens" if tokens else "instruction",
            "data.path": dataset_in(folder, tokens, said, remote)}
