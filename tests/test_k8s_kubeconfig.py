"""Which kubeconfig the Kubernetes client and the guard's k8s_delete.py load: a $KUBECONFIG that lists
several paths (joined by os.pathsep) is handed to the official client as it is, which merges them."""
from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest

pytest.importorskip("kubernetes")

from run_benchmarks.backends.schedulers import k8s_client  # noqa: E402
from run_benchmarks.backends.schedulers.k8s import Kubernetes  # noqa: E402
from run_benchmarks.catalog.kubernetes_spec import KubernetesSpec  # noqa: E402


def config_file(path, name: str, server: str):
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": name,
        "clusters": [{"name": name, "cluster": {"server": server}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": "me"}}],
        "users": [{"name": "me", "user": {}}]}), encoding="utf-8")
    return path


@pytest.fixture
def listed(tmp_path, monkeypatch):
    first = config_file(tmp_path / "a", "alpha", "http://127.0.0.1:1")
    second = config_file(tmp_path / "b", "beta", "http://127.0.0.1:2")
    value = os.pathsep.join([str(tmp_path / "missing"), str(first), str(second)])
    monkeypatch.setenv("KUBECONFIG", value)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config of the machine's user
    return value


def test_a_kubeconfig_list_is_used_merged_with_a_context_from_either_file(listed):
    spec = KubernetesSpec(shared_dir="/s", shared_claim="c", context="beta")
    assert k8s_client.kubeconfig(spec) == listed
    assert k8s_client.api_client(spec).configuration.host == "http://127.0.0.1:2"


def test_the_guards_argv_carries_the_same_list(listed):
    spec = KubernetesSpec(shared_dir="/s", shared_claim="c", context="alpha")
    argv = Kubernetes._delete_argv(SimpleNamespace(spec=spec), "ab-r1")
    assert argv[argv.index("--kubeconfig") + 1] == listed and argv[-3:] == ["--context", "alpha", "ab-r1"]


def test_the_cluster_files_kubeconfig_wins_and_nothing_found_means_in_cluster(listed, tmp_path, monkeypatch):
    own = KubernetesSpec(shared_dir="/s", shared_claim="c", kubeconfig=str(tmp_path / "a"))
    assert k8s_client.kubeconfig(own) == str(tmp_path / "a")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    assert k8s_client.kubeconfig(KubernetesSpec(shared_dir="/s", shared_claim="c")) is None
