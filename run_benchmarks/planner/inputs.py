"""Where accelbench's tree is and what a command loads from it: every config a plan needs, validated."""
from __future__ import annotations

import os
import secrets
import sys
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Optional, Sequence

from run_benchmarks.catalog.cases import CaseCatalog
from run_benchmarks.catalog.config import load_model
from run_benchmarks.catalog.config_files import ClusterSpec, HostSpec, TestConf
from run_benchmarks.errors import UserError
from run_benchmarks.plan import Paths, PlanInputs
from run_benchmarks.catalog.vendors import VendorRegistry
from run_benchmarks.catalog.root import default_root, is_root  # noqa: F401 - re-exported for the commands


def load_inputs(root: Path, test_conf_path: Optional[Path] = None,
                cluster_path: Optional[Path] = None) -> PlanInputs:
    """Load and validate every config a plan needs; a file given explicitly must exist."""
    paths = Paths(root.resolve())
    if not paths.cases_dir.is_dir():
        raise UserError(f"{paths.root} has no cases/ folder", "run from an accelbench checkout, or pass --root")
    default_test_conf = paths.configs_dir / "test_conf.yaml"
    test_conf_path = test_conf_path or default_test_conf
    test_conf = TestConf() if test_conf_path == default_test_conf and not os.path.lexists(test_conf_path) \
        else load_model(TestConf, test_conf_path)
    default_cluster = paths.configs_dir / "cluster.yaml"
    cluster_path = cluster_path or default_cluster
    if cluster_path == default_cluster and not os.path.lexists(cluster_path):
        cluster = ClusterSpec(hosts=[HostSpec(name="localhost")])  # no cluster file: this machine alone
    elif not cluster_path.exists():  # a FIFO or device is there: read_config_text names what it is
        raise UserError(f"--cluster {cluster_path}: file not found",
                        f"write it (YAML): `hosts:` as a list, one entry per node in order, e.g. "
                        f"`hosts: [{{name: node0, backend: ssh, address: 10.0.0.10, user: bench, identity_file: "
                        f"~/.ssh/id_ed25519, known_hosts: ~/.ssh/known_hosts}}]`; every key is in README.md, "
                        f"'Hosts over SSH', and {default_cluster} is an example")
    else:
        cluster = load_model(ClusterSpec, cluster_path)
    return PlanInputs(paths, test_conf, test_conf_path, cluster, cluster_path, VendorRegistry(paths.vendors_dir),
                      CaseCatalog(paths.cases_dir, paths.vendors_dir), sys.executable)


def with_kubeconfig_exec(inputs: PlanInputs, allowed: bool) -> PlanInputs:
    """``--allow-kubeconfig-exec``: the kubeconfig's credential commands may run, for this invocation only."""
    k8s = inputs.cluster.kubernetes
    if not allowed or k8s is None:
        return inputs
    return replace(inputs, cluster=inputs.cluster.model_copy(update={"kubernetes": k8s.allowing_any_exec()}))


def new_run_id() -> str:
    return f"{datetime.now().strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def split_case_names(values: Sequence[str]) -> list[str]:
    return [name.strip() for value in values for name in value.split(",") if name.strip()]
