"""Leftovers of runs whose orchestrator died: found before a run measures, removed by ``accelbench clean``.

What the orchestrator starts carries its owner: processes in their environment (``ACCELBENCH_RUN_ID``,
``ACCELBENCH_ORCHESTRATOR`` = ``host:pid:start``, see ``hosts.guard``), containers in their labels. An
owner on this machine whose pid is gone (or reused: its start time differs) is dead; one on another
machine cannot be told from here. Processes of an older accelbench (untagged) are found by their module
(``training.run_pretraining``, ``training.monitor``) in the command line.

At a run's start the leftovers on its hosts become a warning in every round's results (figures taken
beside them may be low); containers of dead orchestrators are removed (their logs kept first).
``accelbench clean`` also ends such processes and removes stale Docker bridge folders. Processes are found
and ended on each host by the reaper's ``scan`` mode (hosts/reaper.py), the script the guards and
``Host.stop`` use too.
"""
from __future__ import annotations

import json
import shutil
import socket
import sys
import time
from pathlib import Path
from typing import Iterable, Optional

from run_benchmarks.backends.hosts import Host, reaper
from run_benchmarks.backends.hosts.guard import orchestrator_alive
from run_benchmarks.backends.fanout import fan_out

def _probe_python(host: Host) -> str:
    return sys.executable if host.spec.backend == "local" else "python3"


def scan(host: Host, kill: bool = False) -> Optional[dict]:
    """The accelbench processes on ``host`` (``{"machine", "processes"}``), or None if the probe failed."""
    try:
        result = host.run(reaper.scan_argv(_probe_python(host), kill), timeout_s=60)
        return json.loads(result.stdout) if result.returncode == 0 else None
    except (OSError, ValueError):
        return None


def _owner_words(owner: str) -> str:
    if owner.count(":") < 2:
        return "an orchestrator"
    host, pid, _ = owner.rsplit(":", 2)
    return f"pid {pid} on {host}"


def groups(host_name: str, processes: list[dict]) -> list[dict]:
    """Another run's processes on a host, one entry per run: what ``show --verbose`` lists. Processes of one
    orchestrator are one run's, also those that carry no run id (a launcher or monitor started before the id was
    in their environment): grouped by owner, named by the run id any of them carries."""
    found: dict[tuple, list[dict]] = {}
    for proc in processes:
        key = (proc["owner"], proc["alive"]) if proc["owner"] else (proc["run"], "", proc["alive"])
        found.setdefault(key, []).append(proc)
    return [{"host": host_name, "run": next((p["run"] for p in procs if p["run"]), "") or "(no run id)",
             "owner": procs[0]["owner"], "alive": procs[0]["alive"], "pids": [p["pid"] for p in procs],
             "cmd": procs[0]["cmd"][:100]} for procs in found.values()]


def describe(host_name: str, processes: list[dict]) -> list[str]:
    """One short warning per other run found on a host; its pids are for ``show --verbose`` (``groups``)."""
    lines = []
    for group in groups(host_name, processes):
        run, owner, alive = group["run"], group["owner"], group["alive"]
        if not owner:
            whose = "untagged: an older accelbench, or started by hand"
        elif alive is False:
            whose = f"run {run}; its orchestrator, {_owner_words(owner)}, is gone; `accelbench clean` ends them"
        elif alive:
            whose = f"run {run}, still running from {_owner_words(owner)}"
        else:
            whose = f"run {run} of {_owner_words(owner)}"
        lines.append(f"another run's workers are still running on {host_name}: {len(group['pids'])} process(es) "
                     f"({whose}); figures may be low")
    return lines


def leftovers(hosts: dict[str, Host]) -> tuple[list[str], list[dict]]:
    """Other runs' processes on the machines about to be measured, each machine once: the short warnings, and
    per run its pids (kept with every round for ``show --verbose``)."""
    names = list(hosts)
    found, _ = fan_out(lambda name: scan(hosts[name]), names)
    lines, details, seen = [], [], set()
    for name, report in zip(names, found):
        if not report or report["machine"] in seen:
            continue
        seen.add(report["machine"])
        lines += describe(name, report["processes"])
        details += groups(name, report["processes"])
    return lines, details


def leftover_warnings(hosts: dict[str, Host]) -> list[str]:
    return leftovers(hosts)[0]


def kill_leftovers(hosts: dict[str, Host]) -> list[str]:
    """End the processes whose orchestrator is dead, on each machine once."""
    names = list(hosts)
    found, _ = fan_out(lambda name: scan(hosts[name], kill=True), names)
    lines, seen = [], set()
    for name, report in zip(names, found):
        if report is None:
            lines.append(f"host {name}: could not look for leftover processes (python3 missing there?)")
            continue
        if report["machine"] in seen:
            continue
        seen.add(report["machine"])
        for proc in report["processes"]:
            if proc["alive"] is False:
                lines.append(f"host {name}: ended pid {proc['pid']} of run {proc['run']}: {proc['cmd'][:100]}")
            elif not proc["owner"] or proc["alive"] is None:
                lines.append(f"host {name}: left pid {proc['pid']} alone (owner unknown: "
                             f"{proc['owner'] or 'untagged'}): {proc['cmd'][:100]}")
    return lines


def sweep_containers(client) -> list[str]:
    """Remove the accelbench containers on this engine whose orchestrator is dead; their output is saved
    first beside the node's logs (``<container>.recovered.log``) when those are on this machine."""
    from run_benchmarks.backends.runtimes.docker import LABEL_HOST, LABEL_LOG, LABEL_PID, LABEL_RUN, LABEL_START

    lines = []
    for container in client.containers.list(all=True, filters={"label": LABEL_PID}, ignore_removed=True):
        labels = container.labels or {}
        if orchestrator_alive(labels.get(LABEL_HOST, ""), labels.get(LABEL_PID, "0"),
                              labels.get(LABEL_START, "")) is not False:
            continue
        saved = ""
        folder = Path(labels.get(LABEL_LOG, "") or "/nonexistent")
        if folder.is_dir():
            try:
                target = folder / f"{container.name}.recovered.log"
                target.write_bytes(container.logs(stdout=True, stderr=True))
                saved = f"; its output: {target}"
            except (OSError, Exception):  # noqa: BLE001 - removing it matters more
                pass
        try:
            container.remove(force=True)
        except Exception:  # noqa: BLE001 - gone meanwhile
            pass
        lines.append(f"removed container {container.name} ({container.status}) of run {labels.get(LABEL_RUN, '?')}: "
                     f"its orchestrator, pid {labels.get(LABEL_PID)} on {labels.get(LABEL_HOST)}, is gone{saved}")
    return lines


def sweep_bridge_folders(tmp: str = "/tmp", min_age_s: float = 60.0) -> list[str]:
    """Remove ``/tmp/accelbench-docker-*`` folders (the SSH Docker bridges' sockets) of dead orchestrators."""
    from run_benchmarks.backends.runtimes.docker import BRIDGE_OWNER, BRIDGE_PREFIX

    lines = []
    for folder in sorted(Path(tmp).glob(f"{BRIDGE_PREFIX}*")):
        owner_file = folder / BRIDGE_OWNER
        try:
            owner = owner_file.read_text(encoding="utf-8").strip()
        except OSError:
            owner = ""
        if owner.count(":") >= 2:
            host, pid, start = owner.rsplit(":", 2)
            if orchestrator_alive(host, pid, start) is not False:
                continue
        else:  # an older accelbench's, or one being made: stale if nobody listens on its socket
            try:
                if time.time() - folder.stat().st_mtime < min_age_s or _listening(folder / "docker.sock"):
                    continue
            except OSError:
                continue
        shutil.rmtree(folder, ignore_errors=True)
        lines.append(f"removed {folder} (its orchestrator is gone)")
    return lines


def _listening(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(2)
        try:
            s.connect(str(path))
            return True
        except OSError:
            return False


def _clip(text: str, limit: int = 200) -> str:
    """A URL or an engine's error as a message shows it (a --docker-host may be 100,000 characters)."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def clean(hosts: dict[str, Host], container_hosts: Iterable[str], docker_hosts: Iterable[str] = (),
          unreached: Optional[list[str]] = None) -> list[str]:
    """What ``accelbench clean`` does: containers first (their output saved), then processes, then the
    local bridge folders. ``docker_hosts``: more engines (URLs) to sweep, besides the container hosts'.
    ``unreached`` collects each engine that could not be swept: the command then fails (exit 1), since
    what it was asked to clean may still be there."""
    from run_benchmarks.backends.runtimes.docker import docker_client

    lines, unreached = [], unreached if unreached is not None else []
    for name in container_hosts:
        try:
            client = docker_client(hosts[name])
            try:
                lines += [f"host {name}: {line}" for line in sweep_containers(client)]
            finally:
                client.close()
        except Exception as exc:  # noqa: BLE001 - the other hosts are still cleaned
            unreached.append(f"host {name}")
            lines.append(f"host {name}: could not reach its Docker engine: {type(exc).__name__}: {_clip(str(exc))}")
    for url in docker_hosts:
        import docker

        try:
            client = docker.DockerClient(base_url=url, timeout=60)
            try:
                lines += [f"{_clip(url)}: {line}" for line in sweep_containers(client)]
            finally:
                client.close()
        except Exception as exc:  # noqa: BLE001
            unreached.append(_clip(url))
            lines.append(f"{_clip(url)}: could not reach the Docker engine: {type(exc).__name__}: "
                         f"{_clip(str(exc).replace(url, '<the URL>'))}")
    lines += kill_leftovers(hosts)
    lines += sweep_bridge_folders()
    return lines


__all__ = ["clean", "describe", "groups", "kill_leftovers", "leftover_warnings", "leftovers", "scan",
           "sweep_bridge_folders",
           "sweep_containers"]
