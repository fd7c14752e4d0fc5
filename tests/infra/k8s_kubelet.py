"""Real pods for the Kubernetes API stand-in (tests/infra/k8s_api.py): two "nodes" that are network
namespaces joined by one veth pair (no other link, no route anywhere else), and a kubelet that runs each pod
of a Job on node ``index % 2`` from the manifests the scheduler rendered: the containers' command and args,
``JOB_COMPLETION_INDEX``, the Job's hosts (``<job>-<i>.<service>``) in the pod's own /etc/hosts, the
ConfigMap as files, the shared claim as this machine's folder at the same path, /dev/shm as a tmpfs.

No image is run (no container runtime): each container is a process in its own mount, UTS and PID
namespaces (tests/infra/k8s_pod.py prepares them), on this machine's file system. A native sidecar
(an init container with ``restartPolicy: Always``) starts first and is stopped once the launcher ends. A
delete ends a pod as the kubelet does: SIGTERM to each container's first process, SIGKILL after the grace
period (a killed first process takes its whole PID namespace with it); the pod goes once all have ended.
Needs root (``ip netns``, ``unshare``, ``mount``).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Optional

import psutil

from .k8s_api import Cluster, exited, running

POD_ENTRY = Path(__file__).with_name("k8s_pod.py")
DEFAULT_GRACE_S = 30  # Kubernetes' terminationGracePeriodSeconds when a pod names none
SIDECAR_GRACE_S = 5.0
NAMESPACE_PROGRAMS = ["unshare", "--mount", "--uts", "--pid", "--fork", "--kill-child", "--mount-proc",
                      "--propagation", "private", "--"]


class NetnsUnavailable(RuntimeError):
    """The command that failed and what it said."""


def _ip(*args: str) -> str:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise NetnsUnavailable(f"`ip {' '.join(args)}` exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout


class PodNodes:
    """Two network namespaces ``<tag>-node0``/``-node1``, addresses 10.235.0.1 and .2 on one veth pair."""

    def __init__(self, tag: str):
        self.names = [f"{tag}-node{i}" for i in range(2)]
        self.addresses = [f"10.235.0.{i + 1}" for i in range(2)]

    def create(self) -> "PodNodes":
        made = []
        try:
            for name in self.names:
                _ip("netns", "add", name)
                made.append(name)
            _ip("-n", self.names[0], "link", "add", "eth0", "type", "veth", "peer", "name", "eth0",
                "netns", self.names[1])
            for name, address in zip(self.names, self.addresses):
                _ip("-n", name, "addr", "add", f"{address}/24", "dev", "eth0")
                _ip("-n", name, "link", "set", "lo", "up")
                _ip("-n", name, "link", "set", "eth0", "up")
        except NetnsUnavailable:
            for name in made:
                _ip("netns", "del", name)
            raise
        return self

    def pids(self) -> list[int]:
        """Every process in either node's network namespace."""
        return [int(p) for name in self.names for p in _ip("netns", "pids", name).split()]

    def remove(self) -> None:
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for name in self.names:
            _ip("netns", "del", name)


class _Pod:
    def __init__(self, grace_s: float):
        self.grace_s = grace_s
        self.processes: dict[str, subprocess.Popen] = {}  # container -> its `ip netns exec ... unshare`
        self.stopping = False


def _first_process(process: subprocess.Popen) -> Optional[psutil.Process]:
    """The container's PID 1 (unshare's forked child) as this machine sees it."""
    try:
        children = psutil.Process(process.pid).children()
    except psutil.NoSuchProcess:
        return None
    return children[0] if children else None


def _end(process: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM to the container's first process, SIGKILL (of unshare, which kills its child) after grace."""
    first = _first_process(process)
    if first is not None:
        try:
            first.send_signal(signal.SIGTERM)
        except psutil.NoSuchProcess:
            pass
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _exit_code(process: subprocess.Popen) -> int:
    code = process.returncode
    return 128 - code if code < 0 else code


def _tmpfs_size(limit: Optional[str]) -> str:
    return (limit or "64Mi").removesuffix("i").lower()


class Kubelet:
    """Runs the stand-in's pods for real on ``nodes``; every pod's files under ``folder``."""

    def __init__(self, nodes: PodNodes, folder: Path):
        self.nodes, self.folder = nodes, folder
        self.pods: dict[str, _Pod] = {}  # pods whose containers run (or are being ended)
        self.lock = threading.Lock()

    # ------------------------------------------------------------ a pod's start

    def run_pod(self, cluster: Cluster, pod_name: str, index: int, job_name: str) -> None:
        with cluster.cond:
            pod = cluster.pods.get(pod_name)
            if pod is None or pod["metadata"].get("deletionTimestamp"):
                return
            job = cluster.jobs[job_name]
            spec = job["spec"]["template"]["spec"]
            node = self.nodes.names[index % len(self.nodes.names)]
            started = _Pod(spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE_S))
            folder = self.folder / pod_name
            volumes = self._volumes(cluster, spec, folder)
            containers = [c for c in spec.get("initContainers", []) if c.get("restartPolicy") == "Always"]
            containers += spec["containers"]
            with self.lock:
                self.pods[pod_name] = started
            for container in containers:  # sidecars first, as the kubelet starts them
                started.processes[container["name"]] = self._start(cluster, pod_name, container, node, index,
                                                                   job, volumes, folder)
            pod["spec"]["nodeName"] = node
            pod["status"] = running(node)
            cluster._bump("MODIFIED", pod)
        launcher = started.processes[spec["containers"][0]["name"]]
        launcher.wait()
        for name, process in started.processes.items():  # the sidecars: stopped once the launcher ended
            if process is not launcher and process.poll() is None:
                _end(process, SIDECAR_GRACE_S)
        for name in started.processes:
            cluster.logs[(pod_name, name)] = cluster.log(pod_name, name) or ""
        with cluster.cond:
            with self.lock:
                self.pods.pop(pod_name, None)
            status = exited(_exit_code(launcher), node=node)
            status.pop("nodeName")
            pod["status"] = status
            cluster._bump("MODIFIED", pod)
            if pod["metadata"].get("deletionTimestamp") and cluster.pods.pop(pod_name, None) is not None:
                cluster._bump("DELETED", pod)

    def _volumes(self, cluster: Cluster, spec: dict, folder: Path) -> dict[str, dict]:
        """Each volume as a source on this machine: a ConfigMap's keys as files in the pod's folder, the
        claim as the mount path itself (the test's shared folder), an emptyDir as a tmpfs or a folder."""
        found = {}
        for volume in spec.get("volumes", []):
            name = volume["name"]
            if "configMap" in volume:
                data = cluster.owned[("ConfigMap", volume["configMap"]["name"])]["data"]
                source = folder / "volumes" / name
                source.mkdir(parents=True)
                for key, text in data.items():
                    (source / key).write_text(text, encoding="utf-8")
                found[name] = {"kind": "bind", "source": str(source)}
            elif "persistentVolumeClaim" in volume:
                found[name] = {"kind": "claim"}
            elif volume.get("emptyDir", {}).get("medium") == "Memory":
                found[name] = {"kind": "tmpfs", "size": _tmpfs_size(volume["emptyDir"].get("sizeLimit"))}
            else:
                source = folder / "volumes" / name
                source.mkdir(parents=True)
                found[name] = {"kind": "bind", "source": str(source)}
        return found

    def _mounts(self, container: dict, volumes: dict[str, dict]) -> list[dict]:
        claims = [m["mountPath"] for m in container.get("volumeMounts", []) if volumes[m["name"]]["kind"] == "claim"]
        mounts = []
        for mount in container.get("volumeMounts", []):
            volume, target = volumes[mount["name"]], mount["mountPath"]
            if volume["kind"] == "claim":
                if not Path(target).is_dir():
                    raise RuntimeError(f"the claim's mount path {target} is no folder of this machine")
                mounts.append({"kind": "bind", "source": target, "target": target})
                continue
            if not (Path(target).exists() or target.startswith("/etc/") or
                    any(target.startswith(c.rstrip("/") + "/") for c in claims)):
                raise RuntimeError(f"mount path {target}: the test kubelet makes mount points only under /etc "
                                   "(an overlay) or in the shared folder")
            entry = dict(volume, target=target, readonly=bool(mount.get("readOnly")))
            if volume["kind"] == "bind" and mount.get("subPath"):
                entry["source"] = str(Path(volume["source"]) / mount["subPath"])
            mounts.append(entry)
        return mounts

    def _hosts(self, job: dict, index: int, namespace: str) -> str:
        name, subdomain = job["metadata"]["name"], job["spec"]["template"]["spec"].get("subdomain")
        lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback"]
        for peer in range(job["spec"]["completions"]):
            address = self.nodes.addresses[peer % len(self.nodes.addresses)]
            names = [f"{name}-{peer}.{subdomain}.{namespace}.svc.cluster.local", f"{name}-{peer}.{subdomain}"] \
                if subdomain else []
            lines.append(" ".join([address, *names, *([f"{name}-{peer}"] if peer == index else [])]))
        return "\n".join(lines) + "\n"

    def _start(self, cluster: Cluster, pod_name: str, container: dict, node: str, index: int, job: dict,
               volumes: dict, folder: Path) -> subprocess.Popen:
        name = container["name"]
        hostname = f"{job['metadata']['name']}-{index}"
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/root", "HOSTNAME": hostname,
               "JOB_COMPLETION_INDEX": str(index)}
        env.update({e["name"]: e["value"] for e in container.get("env", []) if "value" in e})
        upper, work = folder / name / "etc-upper", folder / name / "etc-work"
        upper.mkdir(parents=True)
        work.mkdir()
        spec = {"etc_upper": str(upper), "etc_work": str(work), "hostname": hostname,
                "hosts": self._hosts(job, index, job["metadata"].get("namespace", "default")),
                "mounts": self._mounts(container, volumes),
                "argv": [*container["command"], *container.get("args", [])], "env": env}
        spec_file = folder / name / "container.json"
        spec_file.write_text(json.dumps(spec, indent=2), encoding="utf-8")
        log = folder / name / "log"
        cluster.log_files[(pod_name, name)] = log
        with open(log, "wb") as out:
            return subprocess.Popen(["ip", "netns", "exec", node, *NAMESPACE_PROGRAMS, sys.executable,
                                     str(POD_ENTRY), str(spec_file)], stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env={"PATH": env["PATH"]}, start_new_session=True)

    # ------------------------------------------------------------ a pod's end

    def stop(self, pod_name: str) -> bool:
        """A delete: end the pod's containers in a thread (the API answers at once); False when none run."""
        with self.lock:
            pod = self.pods.get(pod_name)
            if pod is None:
                return False
            first = not pod.stopping
            pod.stopping = True
        if first:
            threading.Thread(target=self._end_all, args=(pod,), daemon=True).start()
        return True

    @staticmethod
    def _end_all(pod: _Pod) -> None:
        threads = [threading.Thread(target=_end, args=(p, pod.grace_s)) for p in pod.processes.values()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def close(self) -> None:
        """What is still running when the test ends: killed."""
        with self.lock:
            pods = list(self.pods.values())
        for pod in pods:
            for process in pod.processes.values():
                if process.poll() is None:
                    process.kill()
                    process.wait()
