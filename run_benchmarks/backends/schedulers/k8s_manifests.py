"""The objects a Kubernetes round is submitted as, built as data (dicts in the API's JSON form), pure.

Per round: a batch/v1 Indexed Job (one pod per node, ``completions = parallelism = nnodes``, no retries),
a headless Service (each pod answers as ``<job>-<index>.<service>``) and a ConfigMap holding the worker
config and every node's planned launcher argv. A pod runs a fixed entry program (``ENTRY``) that picks its
node's argv by ``JOB_COMPLETION_INDEX`` and ``exec``s it: no user value is ever part of a command text,
each is one element of a JSON list. The argv is the planner's own (the launcher torchrun or
``paddle.distributed.launch``, as on hosts), the address placeholders replaced by the pods' DNS names. With
``master_port: auto`` each pod starts its launcher through training/contract/ports.py: the pod of index 0
chooses the port in its own network and writes it to its node folder on the shared volume (``--publish``),
the others wait for that file (``--wait``, up to the round's deadline); each fills it into its argv and execs.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from typing import TYPE_CHECKING, Optional

from training.contract import ports
from training.contract.names import PORT_SCRIPT

from run_benchmarks.catalog.kubernetes_spec import KubernetesSpec
from run_benchmarks.catalog.vendors import FrameworkRuntime
from run_benchmarks.errors import UserError
from run_benchmarks.backends.schedulers.base import auto_port
from run_benchmarks.backends.schedulers.slurm_script import MASTER_ADDR, NODE_ADDR

if TYPE_CHECKING:
    from run_benchmarks.plan import CasePlan, RoundPlan

MANAGED_BY = {"app.kubernetes.io/managed-by": "accelbench"}
JOB_LABEL = "accelbench.dev/job"
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"  # set on each pod by the Job controller
CONFIG_MOUNT = "/etc/accelbench"
LAUNCHER, MONITOR = "launcher", "monitor"  # the container names
DEADLINE_GRACE_S = 120  # activeDeadlineSeconds beyond accelbench's own deadline: a backstop, not the limit
# The pods' entry: constant text; its only inputs are the mounted nodes.json and the pod's completion index.
ENTRY = ("import json, os, sys; node = json.load(open(sys.argv[1]))[os.environ['JOB_COMPLETION_INDEX']]; "
         "os.makedirs(node['tmp'], exist_ok=True); os.chdir(node['cwd']); argv = node[sys.argv[2]]; "
         "os.execvpe(argv[0], argv, {**os.environ, **node['env']})")


def _slug(text: str) -> str:
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", text.lower())).strip("-")


def object_name(case: "CasePlan", rnd: "RoundPlan") -> str:
    """The Job's (and its Service's and ConfigMap's) name: a DNS label short enough that the pods' host
    names ``<job>-<index>`` stay within 63 characters; the digest keeps runs and cases apart."""
    run_id = rnd.worker_config.runtime.run_id
    digest = hashlib.sha256(f"{run_id}/{case.dir.name}".encode()).hexdigest()[:8]
    return f"{('ab-' + _slug(case.dir.name))[:32].rstrip('-')}-{digest}-r{rnd.index}"


def pod_address(name: str, index: int) -> str:
    return f"{name}-{index}.{name}"


def labels(case: "CasePlan", rnd: "RoundPlan") -> dict[str, str]:
    return {**MANAGED_BY, JOB_LABEL: object_name(case, rnd),
            "accelbench.dev/run-id": _slug(rnd.worker_config.runtime.run_id)[:63].strip("-")}


def framework_runtime(case: "CasePlan") -> FrameworkRuntime:
    return case.hardware.vendor_spec.frameworks.get(case.name.framework) or FrameworkRuntime()


def image_of(spec: KubernetesSpec, case: "CasePlan") -> str:
    image = spec.image or framework_runtime(case).image
    if not image:
        raise UserError(f"no image for {case.name.framework} pods: the cluster file's kubernetes.image is unset "
                        f"and vendor {case.hardware.vendor} names no frameworks.{case.name.framework}.image",
                        "push the vendor's image to a registry the cluster pulls from and name it in "
                        "kubernetes.image of the cluster file")
    return image


def _filled(argv: list[str], name: str, index: int) -> list[str]:
    master, mine = pod_address(name, 0), pod_address(name, index)
    return [a.replace(MASTER_ADDR, master).replace(NODE_ADDR, mine) for a in argv]


def nodes_document(case: "CasePlan", rnd: "RoundPlan") -> dict:
    """nodes.json: per completion index, the node's launcher and monitor argv, environment, TMPDIR, cwd."""
    from run_benchmarks.backends.runtimes.base import job_env
    name = object_name(case, rnd)
    doc = {}
    for node in rnd.nodes:
        entry = {"launcher": _port_chosen(case, rnd, node.node_rank, _filled(node.argv, name, node.node_rank)),
                 "env": {k: _filled([v], name, node.node_rank)[0] for k, v in sorted(job_env(node).items())},
                 "tmp": str(node.host_dir / "tmp"), "cwd": str(node.cwd)}
        if node.monitor_argv is not None:
            entry["monitor"] = _filled(node.monitor_argv, name, node.node_rank)
        doc[str(node.node_rank)] = entry
    return doc


def _port_chosen(case: "CasePlan", rnd: "RoundPlan", index: int, argv: list[str]) -> list[str]:
    """The launcher argv as a pod starts it: through ports.py where the port is chosen when the round starts."""
    if not auto_port(rnd):
        return argv
    node = rnd.nodes[index]
    record = str(rnd.nodes[0].host_dir / ports.PORT_FILE)
    side = ["--publish", record] if index == 0 else ["--wait", record, "--timeout", f"{case.timeout_s:g}"]
    return [node.python, str(node.cwd / PORT_SCRIPT), *side, "--", *argv]


def config_map(case: "CasePlan", rnd: "RoundPlan", owner: Optional[dict] = None) -> dict:
    meta = {"name": object_name(case, rnd), "labels": labels(case, rnd)}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
            "data": {"config.json": rnd.worker_config.model_dump_json(indent=2) + "\n",
                     "nodes.json": json.dumps(nodes_document(case, rnd), indent=2) + "\n"}}


def service(case: "CasePlan", rnd: "RoundPlan", owner: Optional[dict] = None) -> dict:
    """Headless: no virtual IP, one DNS record per ready pod; unready ones too, so that rank 0's address
    resolves while its peers are still starting (the rendezvous needs it before any pod is ready)."""
    meta = {"name": object_name(case, rnd), "labels": labels(case, rnd)}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta,
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                     "selector": {JOB_LABEL: object_name(case, rnd)}}}


def owner_reference(job_name: str, uid: str) -> dict:
    """Deleting the Job deletes what refers to it (the Service, the ConfigMap) by garbage collection."""
    return {"apiVersion": "batch/v1", "kind": "Job", "name": job_name, "uid": uid, "controller": True,
            "blockOwnerDeletion": True}


def _resources(case: "CasePlan") -> dict:
    wanted = {}
    resource = case.hardware.kind.kubernetes_resource
    if resource:
        wanted[resource] = str(case.name.nprocs_per_node)
    wanted.update({k: str(v) for k, v in sorted(framework_runtime(case).container.kubernetes_resources.items())})
    return {"resources": {"limits": wanted}} if wanted else {}


def _container(spec: KubernetesSpec, name: str, image: str, case: "CasePlan", rnd: "RoundPlan") -> dict:
    options = framework_runtime(case).container
    body = {"name": name, "image": image, "command": [spec.python, "-c", ENTRY],
            "args": [f"{CONFIG_MOUNT}/nodes.json", name],
            "volumeMounts": [{"name": "shared", "mountPath": spec.shared_dir},
                             {"name": "config", "mountPath": CONFIG_MOUNT, "readOnly": True},
                             {"name": "config", "mountPath": str(rnd.nodes[0].host_dir.parent / "config.json"),
                              "subPath": "config.json", "readOnly": True},
                             {"name": "dshm", "mountPath": "/dev/shm"}]}
    if name == LAUNCHER:
        body.update(_resources(case))
    security = {}
    if options.privileged:
        security["privileged"] = True
    if options.cap_add:
        security["capabilities"] = {"add": list(options.cap_add)}
    if security:
        body["securityContext"] = security
    return body


def _shm_limit(size: Optional[str]) -> dict:
    """Docker's shm_size ("2g": binary units) as a Kubernetes quantity ("2Gi")."""
    if not size:
        return {}
    match = re.fullmatch(r"(\d+)([kmgt]?)b?", size.strip().lower())
    if match is None:
        return {"sizeLimit": size}
    return {"sizeLimit": match.group(1) + (match.group(2).upper() + "i" if match.group(2) else "")}


def job(spec: KubernetesSpec, case: "CasePlan", rnd: "RoundPlan") -> dict:
    """The Indexed Job: every pod the same template; which node it is comes from its completion index."""
    name, image, nnodes = object_name(case, rnd), image_of(spec, case), case.name.nnodes
    options = framework_runtime(case).container
    pod_spec = {"restartPolicy": "Never", "subdomain": name, "enableServiceLinks": False,
                "containers": [_container(spec, LAUNCHER, image, case, rnd)],
                "volumes": [{"name": "shared", "persistentVolumeClaim": {"claimName": spec.shared_claim}},
                            {"name": "config", "configMap": {"name": name}},
                            {"name": "dshm", "emptyDir": {"medium": "Memory", **_shm_limit(options.shm_size)}}]}
    if rnd.nodes[0].monitor_argv is not None:  # a native sidecar: stopped by the kubelet once the launcher ends
        pod_spec["initContainers"] = [{**_container(spec, MONITOR, image, case, rnd),
                                       "restartPolicy": "Always"}]
    if options.host_network:
        pod_spec.update(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet")
    if spec.node_selector:
        pod_spec["nodeSelector"] = dict(sorted(spec.node_selector.items()))
    if spec.service_account:
        pod_spec["serviceAccountName"] = spec.service_account
    if spec.image_pull_secret:
        pod_spec["imagePullSecrets"] = [{"name": spec.image_pull_secret}]
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": labels(case, rnd)},
            "spec": {"completionMode": "Indexed", "completions": nnodes, "parallelism": nnodes, "backoffLimit": 0,
                     "ttlSecondsAfterFinished": spec.ttl_after_finished_s,
                     "activeDeadlineSeconds": math.ceil(case.timeout_s) + DEADLINE_GRACE_S,
                     "template": {"metadata": {"labels": labels(case, rnd)}, "spec": pod_spec}}}


def manifests(spec: KubernetesSpec, case: "CasePlan", rnd: "RoundPlan", owner: Optional[dict] = None) -> list[dict]:
    return [job(spec, case, rnd), service(case, rnd, owner), config_map(case, rnd, owner)]


def as_yaml(objects: list[dict]) -> str:
    import yaml
    return yaml.safe_dump_all(objects, sort_keys=False, width=1 << 16)
