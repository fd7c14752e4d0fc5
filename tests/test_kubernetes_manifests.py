"""The Kubernetes scheduler's manifests, rendered in this process without a cluster: the Indexed Job, the
headless Service and the ConfigMap compared whole against the expected objects, the vendor's device
resource and the options a vendor file asks for, every shipped kind validated offline against the
Kubernetes API's own schemas (kubernetes-validate, pinned in setup.cfg), and ``--dry-run``.
"""
from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from run_benchmarks.backends.hosts.guard import orchestrator_tag
from run_benchmarks.backends.schedulers import k8s_manifests as manifests
from run_benchmarks.backends.schedulers.k8s import Kubernetes
from run_benchmarks.catalog.vendors import ContainerOptions, FrameworkRuntime
from run_benchmarks.planner.build import build_run_plan
from run_benchmarks.planner.inputs import load_inputs

from .conftest import ROOT, write

RUN_ID = "20250101-000000-abcd"
SCHEMA_VERSION = "1.33"  # a Kubernetes release whose schemas kubernetes-validate 1.37.0 carries
ODD_SHARED = "/shared/bench's dir $(touch /tmp/accelbench-owned)"  # never created: only planned


def cluster_file(path: Path, master_port=None, **settings) -> Path:
    """A Kubernetes cluster file: ``settings`` under ``kubernetes:``; ``master_port`` auto unless given."""
    settings = {"namespace": "bench", "image": "reg.example/accelbench/torch:2.13", "shared_dir": ODD_SHARED,
                "shared_claim": "bench-rwx", **settings}
    lines = ["scheduler: kubernetes", *([f"master_port: {master_port}"] if master_port else []), "kubernetes:",
             *(f"  {k}: {json.dumps(v)}" for k, v in settings.items())]
    return write(path, "\n".join(lines) + "\n")


def planned(tmp_path: Path, case_name: str, root: Path = ROOT, **settings):
    inputs = load_inputs(root, None, cluster_file(tmp_path / "k8s.yaml", **settings))
    plan = build_run_plan(inputs, [case_name], RUN_ID, tmp_path / "logs")
    return inputs.cluster.kubernetes, plan.cases[0], plan.cases[0].rounds[0]


def _named(obj):
    """This machine's parts named: the code's digest and this process."""
    text = re.sub(r"/code/[0-9a-f]{16}", "/code/DIGEST", json.dumps(obj))
    return json.loads(text.replace(orchestrator_tag(), "ORCHESTRATOR").replace(json.dumps(sys.executable)[1:-1],
                                                                                "PYTHON"))


NAME = "ab-gpt2-tiny-torch-cpu-2x1-7129b197-r1"
ROUND = ODD_SHARED + "/runs/20250101-000000-abcd/gpt2_tiny-torch-cpu-2x1/round1"
CONTAINER = """
image: reg.example/accelbench/torch:2.13
command: [python3, -c, "import json, os, sys; node = json.load(open(sys.argv[1]))[os.environ['JOB_COMPLETION_INDEX']]; os.makedirs(node['tmp'], exist_ok=True); os.chdir(node['cwd']); argv = node[sys.argv[2]]; os.execvpe(argv[0], argv, {**os.environ, **node['env']})"]
volumeMounts:
- {name: shared, mountPath: "SHARED"}
- {name: config, mountPath: /etc/accelbench, readOnly: true}
- {name: config, mountPath: "ROUND/config.json", subPath: config.json, readOnly: true}
- {name: dshm, mountPath: /dev/shm}
"""
LABELS = {"app.kubernetes.io/managed-by": "accelbench", "accelbench.dev/job": NAME, "accelbench.dev/run-id": RUN_ID}
EXPECTED_JOB = {
    "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": NAME, "labels": LABELS},
    "spec": {"completionMode": "Indexed", "completions": 2, "parallelism": 2, "backoffLimit": 0,
             "ttlSecondsAfterFinished": 3600, "activeDeadlineSeconds": 3600 + 120,
             "template": {"metadata": {"labels": LABELS}, "spec": {
                 "restartPolicy": "Never", "subdomain": NAME, "enableServiceLinks": False,
                 "containers": [{"name": "launcher", **yaml.safe_load(CONTAINER.replace("SHARED", ODD_SHARED)
                                                                      .replace("ROUND", ROUND)),
                                 "args": ["/etc/accelbench/nodes.json", "launcher"]}],
                 "volumes": [{"name": "shared", "persistentVolumeClaim": {"claimName": "bench-rwx"}},
                             {"name": "config", "configMap": {"name": NAME}},
                             {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}}],
                 "initContainers": [{"name": "monitor", **yaml.safe_load(CONTAINER.replace("SHARED", ODD_SHARED)
                                                                         .replace("ROUND", ROUND)),
                                     "args": ["/etc/accelbench/nodes.json", "monitor"], "restartPolicy": "Always"}],
             }}}}
PORT_FILE = f"{ROUND}/kubernetes_noderank0/master_port"  # where the pod of index 0 writes the port it chose
CHOOSE_PORT = ["python3", f"{ODD_SHARED}/code/DIGEST/training/contract/ports.py"]
EXPECTED_NODE_1 = {  # master_port auto: it waits for the port pod 0 chose, fills it in and runs its launcher
    "launcher": [*CHOOSE_PORT, "--wait", PORT_FILE, "--timeout", "3600", "--",
                 "python3", "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=1", "--node-rank=1",
                 f"--master-addr={NAME}-0.{NAME}", "--master-port=@ACCELBENCH_MASTER_PORT@",
                 f"--local-addr={NAME}-1.{NAME}",
                 "--max-restarts=0", "--monitor-interval=0.25", f"--log-dir={ROUND}/kubernetes_noderank1/torchrun",
                 "--redirects=3", "-m", "training.run_pretraining", "--config", f"{ROUND}/config.json"],
    "env": {"ACCELBENCH_NODE_RANK": "1", "ACCELBENCH_ORCHESTRATOR": "ORCHESTRATOR", "ACCELBENCH_RUN_ID": RUN_ID,
            "ACCELBENCH_VENDOR_DIR": f"{ODD_SHARED}/code/DIGEST/vendors/cpu",
            "PYTHONPATH": f"{ODD_SHARED}/code/DIGEST", "PYTHONUNBUFFERED": "1",
            "TMPDIR": f"{ROUND}/kubernetes_noderank1/tmp",
            "TORCHINDUCTOR_CACHE_DIR": f"{ODD_SHARED}/cache/torchinductor"},
    "tmp": f"{ROUND}/kubernetes_noderank1/tmp", "cwd": f"{ODD_SHARED}/code/DIGEST",
    "monitor": ["python3", "-m", "training.monitor", "--config", f"{ROUND}/config.json", "--interval", "1",
                "--out", f"{ROUND}/kubernetes_noderank1/monitor"]}


def test_a_2x1_round_is_this_indexed_job_service_and_config_map(tmp_path):
    spec, case, rnd = planned(tmp_path, "gpt2_tiny:torch:cpu:2:1")
    owner = manifests.owner_reference(NAME, "uid-1")
    job, service, config = manifests.manifests(spec, case, rnd, owner)
    assert job == EXPECTED_JOB
    assert service == {"apiVersion": "v1", "kind": "Service",
                       "metadata": {"name": NAME, "labels": LABELS, "ownerReferences": [
                           {"apiVersion": "batch/v1", "kind": "Job", "name": NAME, "uid": "uid-1", "controller": True,
                            "blockOwnerDeletion": True}]},
                       "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                                "selector": {"accelbench.dev/job": NAME}}}
    assert config["metadata"] == service["metadata"] and sorted(config["data"]) == ["config.json", "nodes.json"]
    assert json.loads(config["data"]["config.json"]) == json.loads(rnd.worker_config.model_dump_json())
    nodes = _named(json.loads(config["data"]["nodes.json"]))
    assert sorted(nodes) == ["0", "1"] and nodes["1"] == EXPECTED_NODE_1
    # the pod of index 0 chooses the port in its own network and publishes it before its launcher starts
    assert nodes["0"]["launcher"][:5] == [*CHOOSE_PORT, "--publish", PORT_FILE, "--"]
    assert nodes["0"]["launcher"][10:14] == ["--node-rank=0", f"--master-addr={NAME}-0.{NAME}",
                                             "--master-port=@ACCELBENCH_MASTER_PORT@", f"--local-addr={NAME}-0.{NAME}"]
    # the launcher argv is the planner's own, only its address placeholders filled (its port's in the pod)
    assert [a for a in rnd.nodes[1].argv if "ACCELBENCH" not in a] == \
        [a for a in json.loads(config["data"]["nodes.json"])["1"]["launcher"][7:] if NAME not in a
         and "ACCELBENCH" not in a]


def test_a_fixed_master_port_is_the_launchers_own_with_nothing_chosen_in_the_pods(tmp_path):
    spec, case, rnd = planned(tmp_path, "gpt2_tiny:torch:cpu:2:1", master_port=29500)
    nodes = _named(json.loads(manifests.config_map(case, rnd)["data"]["nodes.json"]))
    assert nodes["1"]["launcher"] == [
        *EXPECTED_NODE_1["launcher"][7:14], "--master-port=29500", *EXPECTED_NODE_1["launcher"][15:]]
    assert nodes["0"]["launcher"][5:9] == ["--node-rank=0", f"--master-addr={NAME}-0.{NAME}", "--master-port=29500",
                                           f"--local-addr={NAME}-0.{NAME}"]


def test_the_vendor_kind_names_the_device_resource_and_count_per_pod(tmp_path):
    spec, case, rnd = planned(tmp_path, "gpt2_tiny:torch:H100:2:8")
    (launcher,) = manifests.job(spec, case, rnd)["spec"]["template"]["spec"]["containers"]
    assert launcher["resources"] == {"limits": {"nvidia.com/gpu": "8"}}
    assert launcher["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}  # vendors/nvidia asks for it
    pod = manifests.job(spec, case, rnd)["spec"]["template"]["spec"]
    assert "hostNetwork" not in pod and "privileged" not in json.dumps(pod)
    assert "resources" not in pod["initContainers"][0]  # the monitor asks for no device
    spec, case, rnd = planned(tmp_path, "gpt2_tiny:torch:MI300X:1:4")
    (launcher,) = manifests.job(spec, case, rnd)["spec"]["template"]["spec"]["containers"]
    assert launcher["resources"] == {"limits": {"amd.com/gpu": "4"}}


def test_host_network_rdma_and_privileges_only_where_the_vendor_asks(tmp_path):
    spec, case, rnd = planned(tmp_path, "gpt2_tiny:torch:H100:2:8", node_selector={"pool": "h100"},
                              image_pull_secret="regcred", service_account="bench")
    asks = ContainerOptions(host_network=True, privileged=True, shm_size="512m",
                            kubernetes_resources={"rdma/hca_shared_devices_a": 1})
    vendor = case.hardware.vendor_spec.model_copy(update={"frameworks": {"torch": FrameworkRuntime(container=asks)}})
    case = dataclasses.replace(case, hardware=dataclasses.replace(case.hardware, vendor_spec=vendor))
    pod = manifests.job(spec, case, rnd)["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert pod["containers"][0]["securityContext"] == {"privileged": True}
    assert pod["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "8", "rdma/hca_shared_devices_a": "1"}}
    assert pod["volumes"][2] == {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "512Mi"}}
    assert pod["nodeSelector"] == {"pool": "h100"} and pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["serviceAccountName"] == "bench"


def _kind_root(tmp_path: Path) -> Path:
    """A tree with the shipped vendors and the test kind's, as a vendor adds theirs."""
    root = tmp_path / "root"
    (root / "vendors").mkdir(parents=True)
    for name in ("cases", "configs", "training"):
        (root / name).symlink_to(ROOT / name)
    for vendor in (ROOT / "vendors").iterdir():
        (root / "vendors" / vendor.name).symlink_to(vendor)
    (root / "vendors" / "testkind").symlink_to(ROOT / "tests" / "vendors" / "testkind")
    return root


@pytest.mark.parametrize("case_name", ["gpt2_tiny:torch:cpu:2:1", "gpt2_tiny:torch:cpu:1:2",
                                       "gpt2_tiny:torch:H100:2:8", "gpt3_6.7B:paddle:A100:2:8",
                                       "gpt2_tiny:torch:MI300X:4:8", "gpt2_tiny:torch:TK1:2:3"])
def test_every_shipped_kind_renders_objects_the_api_schemas_accept(tmp_path, case_name):
    spec, case, rnd = planned(tmp_path, case_name, root=_kind_root(tmp_path))
    owner = manifests.owner_reference(manifests.object_name(case, rnd), "3f2504e0-4f89-11d3-9a0c-0305e82c3301")
    for obj in manifests.manifests(spec, case, rnd, owner):
        assert kubernetes_validate.validate(obj, SCHEMA_VERSION, strict=True) == SCHEMA_VERSION
    if case.name.hardware == "TK1":
        (launcher,) = manifests.job(spec, case, rnd)["spec"]["template"]["spec"]["containers"]
        assert launcher["resources"] == {"limits": {"accelbench.dev/testkind": "3"}}


def test_the_schemas_refuse_a_broken_job(tmp_path):
    """The validation above can fail: a Job with a misplaced key is refused."""
    spec, case, rnd = planned(tmp_path, "gpt2_tiny:torch:cpu:2:1")
    job = manifests.job(spec, case, rnd)
    job["spec"]["template"]["spec"]["containers"][0]["limits"] = {"cpu": "1"}
    with pytest.raises(kubernetes_validate.ValidationError, match="'limits' was unexpected"):
        kubernetes_validate.validate(job, SCHEMA_VERSION, strict=True)


def test_names_stay_dns_labels_short_enough_for_the_pods_host_names(tmp_path):
    spec, case, rnd = planned(tmp_path, "gpt2_tiny:torch:cpu:2:1")
    long_dir = case.dir.with_name("a_very_long_case_name_" * 5 + "-torch-cpu-2x1")
    name = manifests.object_name(dataclasses.replace(case, dir=long_dir), rnd)
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name) and len(f"{name}-99999") <= 63
    assert name != manifests.object_name(case, rnd)


def test_dry_run_prints_the_manifests_as_yaml_and_writes_nothing(accelbench, tmp_path):
    shared = tmp_path / "shared $(id)"
    cluster = cluster_file(tmp_path / "k8s.yaml", shared_dir=str(shared))
    result = accelbench("run", "gpt2_tiny:torch:cpu:2:1", "--dry-run", "--cluster", cluster)
    assert result.returncode == 0, result.stderr
    text = result.stdout[result.stdout.index("--- namespace bench"):]
    objects = list(yaml.safe_load_all("\n".join(line[4:] for line in text.splitlines()[1:])))
    assert [o["kind"] for o in objects] == ["Job", "Service", "ConfigMap"]
    assert objects[0]["spec"]["completionMode"] == "Indexed"
    assert objects[1]["metadata"]["ownerReferences"][0]["uid"] == "(the Job's uid, once created)"
    assert f"{shared}/runs/" in objects[2]["data"]["nodes.json"]  # as data, in a JSON list
    assert not shared.exists()


def test_a_missing_image_and_a_bad_cluster_file_are_refused_with_the_key(accelbench, tmp_path):
    result = accelbench("run", "gpt2_tiny:torch:cpu:2:1", "--dry-run", "--cluster",
                        cluster_file(tmp_path / "k8s.yaml", image=None))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "kubernetes.image" in result.stderr and "vendor cpu names no frameworks.torch.image" in result.stderr
    result = accelbench("run", "gpt2_tiny:torch:cpu:2:1", "--cluster",
                        cluster_file(tmp_path / "k8s.yaml", namespace="Bench_1"))
    assert result.returncode == 2 and "kubernetes.namespace" in result.stderr
    bad = write(tmp_path / "c.yaml", "scheduler: kubernetes\n")
    result = accelbench("run", "gpt2_tiny:torch:cpu:2:1", "--cluster", bad)
    assert result.returncode == 2 and "needs a 'kubernetes:' section" in result.stderr
    result = accelbench("run", "gpt2_tiny:torch:cpu:2:1", "--cluster",
                        cluster_file(tmp_path / "k8s.yaml", shared_dir="rel/dir"))
    assert result.returncode == 2 and "shared_dir 'rel/dir' must be an absolute path" in result.stderr
    assert Kubernetes.name == "kubernetes"


def test_the_example_cluster_file_plans_and_prints_its_job(accelbench):
    result = accelbench("run", "gpt2_tiny:torch:H100:2:8", "--dry-run", "--cluster",
                        ROOT / "configs" / "kubernetes.example.yaml")
    assert result.returncode == 0, result.stderr
    assert "kind: Job" in result.stdout and "nvidia.com/gpu: '8'" in result.stdout
    assert "claimName: accelbench-rwx" in result.stdout
