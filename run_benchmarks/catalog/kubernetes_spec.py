"""The ``kubernetes:`` section of a cluster file: one Indexed Job per round in a namespace.

Its own module so that config_files.py stays one screen per scheduler; every value here reaches the
cluster as data in a manifest (names are checked against Kubernetes' own name rules first)."""
from __future__ import annotations

import posixpath
from pathlib import PurePosixPath
from typing import Optional

from pydantic import Field, PositiveFloat, PrivateAttr, conint, constr, model_validator

from run_benchmarks.catalog.config import Strict

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"  # RFC 1123 label: namespaces, claims, secrets
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"


class KubernetesSpec(Strict):
    """A Kubernetes cluster reached with a kubeconfig; the nodes' folders are a ReadWriteMany volume that
    this machine also sees at ``shared_dir`` (as Slurm's shared directory)."""

    namespace: str = Field("default", pattern=DNS_LABEL)
    kubeconfig: Optional[str] = Field(None, description="the kubeconfig file; default: $KUBECONFIG, then "
                                                        "~/.kube/config, then the in-cluster service account")
    context: Optional[str] = Field(None, min_length=1, max_length=253, description="a context of the kubeconfig")
    image: Optional[str] = Field(None, min_length=1, max_length=512, description=(
        "the image every pod runs, from a registry the cluster can pull; default: the vendor's "
        "frameworks.<framework>.image"))
    image_pull_secret: Optional[str] = Field(None, pattern=DNS_SUBDOMAIN)
    service_account: Optional[str] = Field(None, pattern=DNS_SUBDOMAIN)
    shared_dir: str = Field(description="the volume's path on this machine and in every pod: code, configs "
                                        "and logs go there")
    shared_claim: str = Field(pattern=DNS_SUBDOMAIN, description="the PersistentVolumeClaim (ReadWriteMany) "
                                                                 "mounted at shared_dir in every pod")
    python: str = Field("python3", min_length=1, description="the interpreter inside the image")
    node_selector: dict[str, str] = Field(default_factory=dict, description="nodeSelector of every pod")
    pending_timeout_s: PositiveFloat = Field(300, allow_inf_nan=False, le=86400, description=(
        "a pod still Pending this long after its creation is 'not scheduled' (with the scheduler's reason)"))
    ttl_after_finished_s: conint(ge=0, le=604800) = Field(3600, description="ttlSecondsAfterFinished: the "
                                                                            "cluster removes a finished job")
    max_nodes: conint(ge=1, le=65536) = Field(1024, description="most pods one case may ask for")
    poll_s: PositiveFloat = Field(1.0, allow_inf_nan=False, le=60, description="watch timeout: how often the "
                                                                               "pods' states are read again")
    allow_exec: list[constr(min_length=1, max_length=4096)] = Field(
        default_factory=list, max_length=100, description=(
            "commands the kubeconfig may make the client run for credentials (an exec plugin's command, a gcp "
            "auth-provider's cmd-path), each exactly as the kubeconfig names it, e.g. [aws, "
            "gke-gcloud-auth-plugin]; any other is refused at preflight"))
    _exec_by_flag: bool = PrivateAttr(False)  # --allow-kubeconfig-exec: any command, for this invocation

    def allowing_any_exec(self) -> "KubernetesSpec":
        """This spec with every kubeconfig command allowed (``--allow-kubeconfig-exec``)."""
        copy = self.model_copy()
        copy._exec_by_flag = True
        return copy

    def exec_allowed_by(self, command: str) -> Optional[str]:
        """What allows the kubeconfig's ``command`` to run, in words; None: nothing does."""
        if command in self.allow_exec:
            return "kubernetes.allow_exec of the cluster file"
        return "--allow-kubeconfig-exec" if self._exec_by_flag else None

    @model_validator(mode="after")
    def _absolute_shared_dir(self) -> "KubernetesSpec":
        if not PurePosixPath(self.shared_dir).is_absolute():
            raise ValueError(f"shared_dir {self.shared_dir!r} must be an absolute path (the volume is mounted "
                             "there in every pod)")
        system = system_folder(self.shared_dir)
        if system:
            raise ValueError(f"shared_dir {self.shared_dir!r} is {system}: the run would put code, configs and "
                             "logs there (and mount the volume over it in every pod); give a folder of its own, "
                             "e.g. /shared/accelbench")
        return self


# Folders of the operating system: a shared folder there would put the run's code, configs and logs among the
# system's files (and, in a pod, mount the volume over them). ``/`` itself, each of these, and any folder
# inside the first group are refused; the second group (/home, /var, ...) only as the folder itself.
SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/sbin", "/sys",
                "/usr")
SYSTEM_ROOTS = ("/home", "/media", "/mnt", "/opt", "/root", "/run", "/srv", "/tmp", "/var")


def system_folder(path: str) -> Optional[str]:
    """What ``path`` is when it is a system folder (``/``, ``/etc``, inside ``/usr``...), else None."""
    clean = posixpath.normpath("/" + path.lstrip("/"))
    clean = "/" + clean.lstrip("/")  # normpath keeps a leading "//"
    if clean == "/":
        return "the root of the file system"
    if clean in SYSTEM_ROOTS:
        return f"the system folder {clean}"
    for tree in SYSTEM_TREES:
        if clean == tree or clean.startswith(tree + "/"):
            return f"the system folder {tree}" if clean == tree else f"inside the system folder {tree}"
    return None
