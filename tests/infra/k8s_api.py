"""A Kubernetes API stand-in on loopback, for the official client: a thread of the test process serving only
what accelbench's Kubernetes scheduler uses, in the API's own JSON form.

Served: ``/version``; read a namespace; list nodes; create, read and delete (with its propagation policy) a
batch/v1 Job; create a Service and a ConfigMap; list and watch pods by label (watch: JSON lines from a
resource version, for ``timeoutSeconds``); a pod's log. A created Job gets one pod per completion index
(labelled as the Job controller labels them); each pod then follows the test's ``script(index)``: steps
``(after_s, change)`` where a change is a pod status (``running``, ``exited``, ``unschedulable`` below) or
a callable given the cluster, the pod and the node's folder (to write what its launcher would). Faults:
``watch_410`` watches answered with 410 Gone; ``delete_job`` from outside; a script with no steps is
Pending for ever. Deleting a Job in the foreground ends its running pods with 143 (SIGTERM), removes them,
then what the Job owns. Given a ``kubelet`` (tests/infra/k8s_kubelet.py), pods run for real instead of a
script: it starts them, ends them on a delete and removes them once their processes are gone.
"""
from __future__ import annotations

import json
import threading
import time
import uuid
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Optional
from urllib.parse import parse_qs, urlparse

INDEX_LABEL = "batch.kubernetes.io/job-completion-index"


def _stamp(offset_s: float = 0.0) -> str:
    return datetime.fromtimestamp(time.time() + offset_s, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _container(name: str, state: dict, ready: bool = False) -> dict:
    return {"name": name, "image": "reg.example/img", "imageID": "", "ready": ready, "restartCount": 0,
            "state": state}


def running(node: str) -> dict:
    return {"phase": "Running", "nodeName": node,
            "containerStatuses": [_container("launcher", {"running": {"startedAt": _stamp()}}, True)]}


def exited(code: int, reason: str = "", node: str = "kind-worker") -> dict:
    terminated = {"exitCode": code, "reason": reason or ("Completed" if code == 0 else "Error"),
                  "startedAt": _stamp(), "finishedAt": _stamp()}
    return {"phase": "Succeeded" if code == 0 else "Failed", "nodeName": node,
            "containerStatuses": [_container("launcher", {"terminated": terminated})]}


def unschedulable(message: str) -> dict:
    return {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                                "message": message}]}


def _status(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason,
            "code": code}


class Cluster:
    """The stand-in's state; every change is an event with its resource version, under one lock."""

    def __init__(self, script: Callable[[int], list], namespaces=("bench",), nodes: Optional[dict] = None,
                 kubelet=None):
        self.script, self.namespaces, self.kubelet = script, set(namespaces), kubelet
        self.nodes = nodes if nodes is not None else {"kind-worker": {"cpu": "8"}, "kind-worker2": {"cpu": "8"}}
        self.cond = threading.Condition()
        self.version = 100
        self.jobs: dict[str, dict] = {}
        self.owned: dict[tuple[str, str], dict] = {}  # (kind, name) -> Service or ConfigMap
        self.pods: dict[str, dict] = {}
        self.events: list[tuple[int, str, dict]] = []
        self.logs: dict[tuple[str, str], str] = {}
        self.log_files: dict[tuple[str, str], Path] = {}  # a running container's output, read when asked
        self.deletes: list[tuple[str, Optional[str]]] = []  # (job, propagationPolicy)
        self.watch_410 = 0  # this many watches answer 410 Gone before any event
        self.requests: list[str] = []
        self.forbid_nodes = False
        self.errors: list[str] = []  # what went wrong in the stand-in's own threads

    def _bump(self, kind: str, pod: dict) -> None:
        self.version += 1
        pod["metadata"]["resourceVersion"] = str(self.version)
        self.events.append((self.version, kind, json.loads(json.dumps(pod))))
        self.cond.notify_all()

    # ------------------------------------------------------------ objects

    def create_job(self, body: dict) -> dict:
        with self.cond:
            name = body["metadata"]["name"]
            job = {**body, "metadata": {**body["metadata"], "uid": str(uuid.uuid4()), "namespace": "bench",
                                        "creationTimestamp": _stamp(), "resourceVersion": str(self.version)},
                   "status": {}}
            self.jobs[name] = job
            for index in range(body["spec"]["completions"]):
                labels = {**body["spec"]["template"]["metadata"]["labels"], INDEX_LABEL: str(index),
                          "job-name": name}
                pod = {"metadata": {"name": f"{name}-{index}-{uuid.uuid4().hex[:5]}", "namespace": "bench",
                                    "labels": labels, "creationTimestamp": _stamp(),
                                    "annotations": {INDEX_LABEL: str(index)}},
                       "spec": {"containers": [{"name": "launcher", "image": "reg.example/img"}]},
                       "status": {"phase": "Pending"}}
                self.pods[pod["metadata"]["name"]] = pod
                self._bump("ADDED", pod)
                threading.Thread(target=self._kubelet, args=(pod["metadata"]["name"], index, name),
                                 daemon=True).start()
            return job

    def _kubelet(self, pod_name: str, index: int, job_name: str) -> None:
        """As a kubelet: the pod starts once the ConfigMap it mounts exists, then follows the script."""
        try:
            with self.cond:
                if not self.cond.wait_for(lambda: ("ConfigMap", job_name) in self.owned, timeout=10):
                    return  # a pod whose volume never comes stays Pending (ContainerCreating)
            if self.kubelet is not None:
                self.kubelet.run_pod(self, pod_name, index, job_name)
            else:
                self._follow_script(pod_name, index, job_name)
        except Exception as exc:  # noqa: BLE001 - a broken script is the test's error: it checks errors
            self.errors.append(f"pod {pod_name}: {type(exc).__name__}: {exc}")

    def _follow_script(self, pod_name: str, index: int, job_name: str) -> None:
        began = time.monotonic()
        for after_s, change in self.script(index):
            time.sleep(max(0.0, began + after_s - time.monotonic()))
            with self.cond:
                pod = self.pods.get(pod_name)
                if pod is None or pod["metadata"].get("deletionTimestamp"):
                    return
                if callable(change):
                    change(self, pod, self.node_dir(job_name, index))
                    continue
                status = dict(change)
                node = status.pop("nodeName", None)
                if node:
                    pod["spec"]["nodeName"] = node
                pod["status"] = status
                self._bump("MODIFIED", pod)

    def node_dir(self, job_name: str, index: int) -> Optional[Path]:
        config = self.owned.get(("ConfigMap", job_name))
        if config is None:
            return None
        return Path(json.loads(config["data"]["nodes.json"])[str(index)]["tmp"]).parent

    def delete_job(self, name: str, propagation: Optional[str] = None) -> bool:
        with self.cond:
            job = self.jobs.get(name)
            if job is None:
                return False
            self.deletes.append((name, propagation))
            for pod in [p for p in self.pods.values() if p["metadata"]["labels"].get("job-name") == name]:
                pod["metadata"]["deletionTimestamp"] = _stamp()
                if self.kubelet is not None and self.kubelet.stop(pod["metadata"]["name"]):
                    self._bump("MODIFIED", pod)  # the kubelet removes it once its processes have ended
                    continue
                launcher = (pod["status"].get("containerStatuses") or [{}])[0]
                if "running" in (launcher.get("state") or {}):
                    pod["status"] = exited(143, node=pod["spec"].get("nodeName", "kind-worker"))
                    pod["status"].pop("nodeName")
                self._bump("MODIFIED", pod)
                del self.pods[pod["metadata"]["name"]]
                self._bump("DELETED", pod)
            uid = job["metadata"]["uid"]
            for key, obj in list(self.owned.items()):
                if any(ref["uid"] == uid for ref in obj["metadata"].get("ownerReferences", [])):
                    del self.owned[key]
            del self.jobs[name]
            return True

    def finish_job(self, name: str, reason: Optional[str] = None) -> None:
        """The Job controller's verdict: Complete, or Failed with ``reason`` (DeadlineExceeded)."""
        with self.cond:
            kind = "Failed" if reason else "Complete"
            self.jobs[name]["status"] = {"conditions": [{"type": kind, "status": "True", "reason": reason or ""}]}

    # ------------------------------------------------------------ reads

    def log(self, pod: str, container: str) -> Optional[str]:
        if (pod, container) in self.logs:
            return self.logs[(pod, container)]
        path = self.log_files.get((pod, container))
        return path.read_text(errors="replace") if path is not None and path.is_file() else None

    def select(self, selector: str) -> list[dict]:
        wanted = dict(part.split("=", 1) for part in selector.split(",") if "=" in part)
        return [p for p in self.pods.values() if all(p["metadata"]["labels"].get(k) == v for k, v in wanted.items())]


class _Handler(BaseHTTPRequestHandler):
    cluster: Cluster
    protocol_version = "HTTP/1.1"  # a watch streams in chunks, as the API server's do

    def log_message(self, *args) -> None:
        pass

    def _send(self, code: int, body, content_type: str = "application/json") -> None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}")

    def _route(self, method: str) -> None:
        url = urlparse(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        parts = [p for p in url.path.split("/") if p]
        cluster = self.cluster
        cluster.requests.append(f"{method} {url.path}")
        if parts == ["version"]:
            return self._send(200, {"major": "1", "minor": "33", "gitVersion": "v1.33.0-standin", "gitCommit": "",
                                    "gitTreeState": "clean", "buildDate": _stamp(), "goVersion": "go1.24",
                                    "compiler": "gc", "platform": "linux/amd64"})
        if parts == ["api", "v1", "nodes"]:
            if cluster.forbid_nodes:
                return self._send(403, _status(403, "Forbidden", "nodes is forbidden"))
            return self._send(200, {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": [
                {"metadata": {"name": n}, "spec": {}, "status": {"allocatable": a}} for n, a in cluster.nodes.items()]})
        if parts[:3] == ["api", "v1", "namespaces"] and len(parts) == 4:
            if parts[3] in cluster.namespaces:
                return self._send(200, {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": parts[3]}})
            return self._send(404, _status(404, "NotFound", f'namespaces "{parts[3]}" not found'))
        at = 3 if parts[:2] == ["api", "v1"] else 4  # /api/v1/namespaces/NS/..., /apis/GROUP/V/namespaces/NS/...
        if len(parts) > at + 1 and parts[at] not in cluster.namespaces:
            return self._send(404, _status(404, "NotFound", f'namespaces "{parts[at]}" not found'))
        rest = parts[at + 1:]
        with cluster.cond:
            if rest == ["jobs"] and method == "POST":
                return self._send(201, cluster.create_job(self._body()))
            if rest[:1] == ["jobs"] and len(rest) == 2:
                if method == "DELETE":
                    policy = self._body().get("propagationPolicy")
                    if cluster.delete_job(rest[1], policy):
                        return self._send(200, _status(200, "", "deleted") | {"status": "Success"})
                elif rest[1] in cluster.jobs:
                    return self._send(200, cluster.jobs[rest[1]])
                return self._send(404, _status(404, "NotFound", f'jobs.batch "{rest[1]}" not found'))
            if rest in (["services"], ["configmaps"]) and method == "POST":
                body = self._body()
                kind = "Service" if rest == ["services"] else "ConfigMap"
                cluster.owned[(kind, body["metadata"]["name"])] = body
                cluster.cond.notify_all()
                return self._send(201, body)
            if rest[:1] == ["pods"] and len(rest) == 3 and rest[2] == "log":
                text = cluster.log(rest[1], query.get("container", "launcher"))
                if rest[1] not in cluster.pods or text is None:
                    return self._send(404, _status(404, "NotFound", f'pods "{rest[1]}" not found'))
                return self._send(200, text, "text/plain")
        if rest == ["pods"] and query.get("watch") in ("true", "1"):
            return self._watch(query)
        if rest == ["pods"]:
            with cluster.cond:
                return self._send(200, {"kind": "PodList", "apiVersion": "v1",
                                        "metadata": {"resourceVersion": str(cluster.version)},
                                        "items": cluster.select(query.get("labelSelector", ""))})
        return self._send(404, _status(404, "NotFound", f"the stand-in does not serve {method} {url.path}"))

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _watch(self, query: dict) -> None:
        """Events after the resource version, one JSON line per chunk, until ``timeoutSeconds``."""
        cluster, selector = self.cluster, query.get("labelSelector", "")
        since, end = int(query.get("resourceVersion") or 0), time.monotonic() + float(query.get("timeoutSeconds", 1))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        wanted = dict(part.split("=", 1) for part in selector.split(",") if "=" in part)
        try:
            with cluster.cond:
                gone = cluster.watch_410 > 0
                cluster.watch_410 -= 1 if gone else 0
            if gone:
                self._chunk(json.dumps({"type": "ERROR", "object": _status(410, "Expired", "too old resource "
                                                                           "version")}).encode() + b"\n")
            while not gone and time.monotonic() < end:
                with cluster.cond:
                    fresh = [(v, k, p) for v, k, p in cluster.events if v > since]
                    if not fresh:
                        cluster.cond.wait(timeout=max(0.0, min(0.2, end - time.monotonic())))
                        continue
                for version, kind, pod in fresh:
                    since = version
                    if all(pod["metadata"]["labels"].get(k) == v for k, v in wanted.items()):
                        self._chunk(json.dumps({"type": kind, "object": pod}).encode() + b"\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:  # the client went: the watch ends
            self.close_connection = True

    def do_GET(self) -> None:  # noqa: N802 - http.server's names
        self._route("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._route("POST")

    def do_DELETE(self) -> None:  # noqa: N802
        self._route("DELETE")


class StandIn:
    """The server in a thread; ``kubeconfig`` points the official client at it (plain HTTP, no auth)."""

    def __init__(self, cluster: Cluster, folder: Path):
        handler = type("Handler", (_Handler,), {"cluster": cluster})
        self.cluster, self.server = cluster, ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.kubeconfig = folder / "kubeconfig"
        self.kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "standin",
            "clusters": [{"name": "standin", "cluster": {"server": self.url}}],
            "contexts": [{"name": "standin", "context": {"cluster": "standin", "user": "me"}}],
            "users": [{"name": "me", "user": {}}]}), encoding="utf-8")
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
