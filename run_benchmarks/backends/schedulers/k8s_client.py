"""The Kubernetes API through the official ``kubernetes`` client (an optional extra, imported here only).

Objects cross as the API's JSON form (dicts): what k8s_status reads and what the tests can write by hand.
Every call that fails says which object and what the API answered.
"""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Iterator, Optional

from run_benchmarks.backends.schedulers import k8s_kubeconfig
from run_benchmarks.catalog.kubernetes_spec import KubernetesSpec
from run_benchmarks.errors import PreflightError

REQUEST_TIMEOUT_S = 30
FIX_CLIENT = "pip install 'accelbench[kubernetes]' (the official kubernetes client)"


def _modules():
    try:
        import kubernetes
    except ImportError:
        raise PreflightError("scheduler kubernetes needs the kubernetes Python client, which is not installed",
                             FIX_CLIENT) from None
    return kubernetes


def kubeconfig(spec: KubernetesSpec) -> Optional[str]:
    """The kubeconfig to load: the cluster file's, else $KUBECONFIG as it is (a list of paths joined by
    os.pathsep, merged as the client merges them) when one of its paths exists, else ~/.kube/config when it
    exists; None: in-cluster. The same string goes to the guard's k8s_delete.py."""
    if spec.kubeconfig:
        return os.path.expanduser(spec.kubeconfig)
    listed = os.environ.get("KUBECONFIG", "")
    if any(os.path.lexists(Path(p).expanduser()) for p in listed.split(os.pathsep) if p):
        return listed  # a FIFO or device there too: the reader refuses it, naming it (k8s_kubeconfig)
    default = Path("~/.kube/config").expanduser()
    return str(default) if os.path.lexists(default) else None


def api_client(spec: KubernetesSpec):
    """An ApiClient from the cluster file's kubeconfig (else $KUBECONFIG, ~/.kube/config), else in-cluster.
    The kubeconfig is read and its credential commands checked against the opt-in first (k8s_kubeconfig):
    a command not allowed stops here, before the client could run it."""
    kubernetes = _modules()
    route_client_logs()
    path = kubeconfig(spec)
    if path is not None:
        config = k8s_kubeconfig.read(path, spec.context)
        k8s_kubeconfig.refuse_unallowed(config, spec)
        for credential in config.credentials:  # said before it runs, as the plan says it
            print(f"accelbench: the kubeconfig runs {credential.words()} for credentials (allowed by "
                  f"{spec.exec_allowed_by(credential.command)})", file=sys.stderr, flush=True)
        try:
            return k8s_kubeconfig.client_from(config, kubernetes)
        except (kubernetes.config.ConfigException, OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            raise PreflightError(f"the kubeconfig {path} cannot be used: {type(exc).__name__}: {str(exc)[:300]}",
                                 k8s_kubeconfig.FIX_FILE) from None
    try:
        kubernetes.config.load_incluster_config()
    except kubernetes.config.ConfigException:
        raise PreflightError("no kubeconfig (none of $KUBECONFIG, ~/.kube/config exists) and not inside a "
                             "cluster", "set kubernetes.kubeconfig in the cluster file, or KUBECONFIG") from None
    return kubernetes.client.ApiClient()


def described(spec: KubernetesSpec) -> list[str]:
    """What the plan says of the kubeconfig: its files and every command it makes the client run."""
    path = kubeconfig(spec)
    return k8s_kubeconfig.described(k8s_kubeconfig.read(path, spec.context) if path is not None else None, spec)


class _ClientLogs(logging.Handler):
    """The client's own log lines (``logging.error`` on the root logger when an exec plugin fails, urllib3's
    retries) as accelbench's warnings on stderr, instead of Python's ``ERROR:root:`` default format."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Only the client's lines: its modules' (on the root logger too) and urllib3's, which it uses."""
        return (record.name.startswith(("kubernetes", "urllib3"))
                or os.sep + "kubernetes" + os.sep in (record.pathname or ""))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = " ".join(record.getMessage().split())
            source = "kubernetes client" if record.name == "root" else record.name
            print(f"accelbench: warning: {source}: {text[:500]}", file=sys.stderr, flush=True)
        except Exception:  # noqa: BLE001 - a log line must never end the run
            self.handleError(record)


def route_client_logs() -> None:
    """Once per process: a handler on the root logger, so that neither ``logging.error`` (which would call
    basicConfig) nor urllib3's logger prints in Python's default format. Warnings and worse, the client's only."""
    root = logging.getLogger()
    if not any(isinstance(h, _ClientLogs) for h in root.handlers):
        root.addHandler(_ClientLogs(level=logging.WARNING))


class KubeClient:
    def __init__(self, spec: KubernetesSpec, api=None):
        self.kubernetes = _modules()
        self.spec, self.namespace = spec, spec.namespace
        self.api = api if api is not None else api_client(spec)
        self.core = self.kubernetes.client.CoreV1Api(self.api)
        self.batch = self.kubernetes.client.BatchV1Api(self.api)

    @property
    def ApiException(self):  # noqa: N802 - the client's class, for callers' except clauses
        return self.kubernetes.client.exceptions.ApiException

    def plain(self, obj) -> dict:
        return self.api.sanitize_for_serialization(obj)

    # ------------------------------------------------------------ preflight

    def version(self) -> str:
        info = self.kubernetes.client.VersionApi(self.api).get_code(_request_timeout=REQUEST_TIMEOUT_S)
        return info.git_version

    def namespace_exists(self) -> bool:
        try:
            self.core.read_namespace(self.namespace, _request_timeout=REQUEST_TIMEOUT_S)
            return True
        except self.ApiException as exc:
            if exc.status == 404:
                return False
            if exc.status == 403:  # may not read namespaces: the submission will tell
                return True
            raise

    def allocatable(self, resource: str) -> Optional[dict[str, int]]:
        """Per schedulable node, how many of ``resource`` it offers; None when nodes may not be listed."""
        try:
            nodes = self.core.list_node(_request_timeout=REQUEST_TIMEOUT_S).items
        except self.ApiException as exc:
            if exc.status in (401, 403):
                return None
            raise
        found = {}
        for node in nodes:
            if node.spec is not None and node.spec.unschedulable:
                continue
            amount = ((node.status.allocatable or {}) if node.status else {}).get(resource, "0")
            found[node.metadata.name] = int(amount) if str(amount).isdigit() else 0
        return found

    # ------------------------------------------------------------ a round

    def create(self, job: dict, owned: list[dict]) -> str:
        """Create the Job, then what it owns (the Service, the ConfigMap) referring to it; the Job's uid."""
        from run_benchmarks.backends.schedulers.k8s_manifests import owner_reference
        created = self.batch.create_namespaced_job(self.namespace, job, _request_timeout=REQUEST_TIMEOUT_S)
        owner = owner_reference(created.metadata.name, created.metadata.uid)
        for obj in owned:
            body = {**obj, "metadata": {**obj["metadata"], "ownerReferences": [owner]}}
            if obj["kind"] == "Service":
                self.core.create_namespaced_service(self.namespace, body, _request_timeout=REQUEST_TIMEOUT_S)
            else:
                self.core.create_namespaced_config_map(self.namespace, body, _request_timeout=REQUEST_TIMEOUT_S)
        return created.metadata.uid

    def job(self, name: str) -> Optional[dict]:
        try:
            return self.plain(self.batch.read_namespaced_job(name, self.namespace, _request_timeout=REQUEST_TIMEOUT_S))
        except self.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def delete_job(self, name: str) -> bool:
        """Foreground propagation: the Job goes once its pods (and its Service and ConfigMap) are gone.
        False when it was not there."""
        body = self.kubernetes.client.V1DeleteOptions(propagation_policy="Foreground")
        try:
            self.batch.delete_namespaced_job(name, self.namespace, body=body, _request_timeout=REQUEST_TIMEOUT_S)
            return True
        except self.ApiException as exc:
            if exc.status == 404:
                return False
            raise

    def pods(self, selector: str) -> tuple[list[dict], str]:
        listed = self.core.list_namespaced_pod(self.namespace, label_selector=selector,
                                               _request_timeout=REQUEST_TIMEOUT_S)
        return [self.plain(p) for p in listed.items], listed.metadata.resource_version

    def watch_pods(self, selector: str, resource_version: str, timeout_s: int) -> Iterator[tuple[str, dict]]:
        """Events after ``resource_version`` for ``timeout_s``; a 410 (too old) raises ApiException."""
        watch = self.kubernetes.watch.Watch()
        for event in watch.stream(self.core.list_namespaced_pod, self.namespace, label_selector=selector,
                                  resource_version=resource_version, timeout_seconds=timeout_s,
                                  _request_timeout=timeout_s + REQUEST_TIMEOUT_S):
            yield event["type"], self.plain(event["object"])

    def log(self, pod: str, container: str, limit_bytes: Optional[int] = None) -> str:
        kwargs = {"limit_bytes": limit_bytes} if limit_bytes else {}
        return self.core.read_namespaced_pod_log(pod, self.namespace, container=container,
                                                 _request_timeout=REQUEST_TIMEOUT_S, **kwargs)
