"""Opt-in, against a real Kubernetes cluster: ``ACCELBENCH_K8S_E2E=1`` and ``ACCELBENCH_K8S_CLUSTER`` naming a
cluster file (``scheduler: kubernetes``, its kubeconfig, namespace, image with accelbench's torch, and a
ReadWriteMany claim mounted on this machine at ``shared_dir``). Everywhere else it is skipped as "needs a
Kubernetes cluster", a reason tests/conftest.py accepts under CI. Not yet run against any cluster.
"""
from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.skipif(
    os.environ.get("ACCELBENCH_K8S_E2E") != "1" or not os.environ.get("ACCELBENCH_K8S_CLUSTER"),
    reason="needs a Kubernetes cluster (set ACCELBENCH_K8S_E2E=1 and ACCELBENCH_K8S_CLUSTER to a cluster file)")


def test_gpt2_tiny_on_two_pods_is_an_ok_round_with_each_pods_facts(cli):
    result = cli("run", "gpt2_tiny:torch:cpu:2:1", "--cluster", os.environ["ACCELBENCH_K8S_CLUSTER"],
                 "--timeout", "900", timeout=1200)
    assert result.returncode == 0, result.stderr + result.stdout
    (doc,) = result.results()
    assert doc["status"] == "ok" and doc["metrics"]["tokens_per_s_total"] > 0, doc["reason"]
    nodes = doc["environment"]["nodes"]
    assert len(nodes) == 2 and all(n["kubernetes"]["pod"] and n["kubernetes"]["node"] for n in nodes)
