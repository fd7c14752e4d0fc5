"""Vendors as installable packages (entry points ``accelbench.vendors``): a throwaway package built from the test
kind (tests/vendor_package.py) and installed by pip into a scratch folder is listed and runs gpt2_tiny (with the
package's own extern config) and ppo_tiny, its worker plugin's hooks in both runs' environments, with no file of
the checkout changed; ``{vendor_dir}`` is the vendor's folder on every node; a name a package and the checkout
both declare, or an entry point that names no vendor folder, is refused.

The in-process tests lay the package out as pip's ``--target`` does (the module beside a ``.dist-info`` with
METADATA and entry_points.txt, which is what importlib.metadata reads), without building it; the end-to-end test
builds and installs it with pip."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path, PurePosixPath

import pytest

from run_benchmarks.backends.codesync import code_files
from run_benchmarks.catalog.vendor_folders import vendor_folders
from training import plugins
from training.contract.names import ENV_VENDOR_DIR, expand_placeholders
from training.contract.spec import DeviceSpec

from .conftest import ROOT, write
from . import goldens
from .test_plan import build
from .vendor_package import ACCELERATOR, CONFIG, DISTRIBUTION, KIND, MODULE, VENDOR, install, write_source


def lay_out(tmp_path: Path, vendor: str = VENDOR, value: str = f"{MODULE}:VENDOR_DIR") -> Path:
    """The package as pip --target leaves it, under ``tmp_path/site``."""
    source, site = write_source(tmp_path / "src", vendor), tmp_path / "site"
    shutil.copytree(source / MODULE, site / MODULE)
    info = site / f"{DISTRIBUTION.replace('-', '_')}-0.1.dist-info"
    write(info / "METADATA", f"Metadata-Version: 2.1\nName: {DISTRIBUTION}\nVersion: 0.1\n")
    write(info / "entry_points.txt", f"[accelbench.vendors]\n{vendor} = {value}\n")
    return site


@pytest.fixture
def on_path(monkeypatch):
    """Put a laid-out package on this process's path (and take it off after)."""
    def put(site: Path) -> Path:
        monkeypatch.syspath_prepend(str(site))
        monkeypatch.delitem(sys.modules, MODULE, raising=False)
        return site / MODULE / "vendor"
    return put


def test_each_node_finds_the_package_folder_as_vendor_dir(root, tmp_path, on_path):
    folder = on_path(lay_out(tmp_path))
    write(root / "configs/cluster.yaml", "hosts:\n  - {name: here}\n  - {name: far, backend: ssh, work_root: /w}\n"
                                         "  - {name: boxed, runtime: container}\n")
    plan = build(root, tmp_path, f"gpt2_tiny:torch:{ACCELERATOR}:3:1")
    (rnd,) = plan.cases[0].rounds
    here, far, boxed = rnd.nodes
    assert vendor_folders(root / "vendors")[VENDOR].path == folder.resolve()
    assert rnd.worker_config.runtime.device.worker_plugin == "{vendor_dir}/plugin.py"
    assert here.env[ENV_VENDOR_DIR] == boxed.env[ENV_VENDOR_DIR] == str(folder.resolve())
    assert far.env[ENV_VENDOR_DIR] == str(far.cwd / "vendors" / VENDOR)  # the package's code is copied there
    assert boxed.container.mounts[str(folder.resolve())] == "ro"  # outside the checkout: mounted on its own
    copied = {str(rel): source for source, rel in code_files(root)}
    assert copied[f"vendors/{VENDOR}/plugin.py"] == folder.resolve() / "plugin.py"
    assert PurePosixPath("training/harness.py") in {rel for _, rel in code_files(ROOT)}


def test_vendor_dir_fills_commands_and_finds_the_worker_plugin(tmp_path, monkeypatch):
    folder = write_source(tmp_path / "src") / MODULE / "vendor"
    argv = expand_placeholders(["{python}", "{vendor_dir}/smi.py", "{code_root}/x"], "py", "/code", str(folder))
    assert argv == ["py", f"{folder}/smi.py", "/code/x"]
    device = DeviceSpec(kind=KIND, worker_plugin="{vendor_dir}/plugin.py")
    monkeypatch.delenv(ENV_VENDOR_DIR, raising=False)
    with pytest.raises(ValueError, match=f"names {{vendor_dir}} but {ENV_VENDOR_DIR} is not set"):
        plugins.load(device)
    monkeypatch.setenv(ENV_VENDOR_DIR, str(folder))  # as the orchestrator sets it for every node
    plugin = plugins.load(device)
    plugin.setup(device)
    assert plugin.environment() == {f"{KIND}_plugin": {"setup_kind": KIND, "visible_at_setup": None}}


def test_a_name_the_checkout_and_a_package_both_declare_is_refused_naming_both(accelbench, root, tmp_path, on_path):
    on_path(lay_out(tmp_path, vendor="cpu"))
    done = accelbench("list", "--root", str(root))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"vendor 'cpu' is declared twice: by the folder {root / 'vendors' / 'cpu'} and by the package " \
           f"{DISTRIBUTION} 0.1 (entry point cpu = {MODULE}:VENDOR_DIR)" in done.stderr
    planned = accelbench("run", "gpt2_tiny:torch:cpu:1:1", "--root", str(root), "--dry-run")
    assert planned.returncode == 2 and "is declared twice" in planned.stderr


@pytest.mark.parametrize("value, said", [
    (f"{MODULE}:MISSING", "loading the entry point failed: AttributeError"),
    (f"{MODULE}.nothing_here:VENDOR_DIR", "loading the entry point failed: ModuleNotFoundError"),
    (f"{MODULE}:os", "the entry point names a module, not a path"),
])
def test_an_entry_point_that_names_no_vendor_folder_is_refused(accelbench, root, tmp_path, on_path, value, said):
    on_path(lay_out(tmp_path, value=value))
    done = accelbench("list", "--root", str(root))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"vendor package {DISTRIBUTION} 0.1 (entry point {VENDOR} = {value}): {said}" in done.stderr
    assert "fix: the entry point must name a str or path attribute" in done.stderr


def test_a_folder_without_vendor_yaml_is_refused(accelbench, root, tmp_path, on_path):
    folder = on_path(lay_out(tmp_path))
    (folder / "vendor.yaml").unlink()
    done = accelbench("list", "--root", str(root))
    assert done.returncode == 2 and f"{folder.resolve()} holds no vendor.yaml" in done.stderr


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The package built and installed by pip into a scratch folder (once for the module)."""
    scratch = tmp_path_factory.mktemp("vendor-package")
    return install(write_source(scratch / "src"), scratch / "site")


def test_an_installed_vendor_package_is_listed_and_runs_like_a_vendor_folder(cli, installed, tmp_path):
    """Cost: one pip install (6-7 s) and one `run` of two one-process SHORT cases without breakdown steps, in one
    invocation, one OpenMP thread each (a lone rank's second thread only spins on shared cores): 124-205 s of
    wall time on 2 shared cores at load 7-10 with two threads (gpt2_tiny's round 22-33 s, ppo_tiny's 85 s at
    load 8), 63 s of CPU. Both tasks run, as issue 44 asks: the plugin's hooks in each task's environment."""
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT), str(installed)])}
    folder = installed / MODULE / "vendor"
    listed = cli("list", "--root", str(ROOT), extra_env=env)
    assert listed.returncode == 0, listed.stderr
    assert f"package {DISTRIBUTION} 0.1" in listed.stdout
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in listed.stdout.splitlines() if "│" in line]
    assert [ACCELERATOR, VENDOR, KIND] in [row[:3] for row in rows]  # the hardware table
    assert [KIND, VENDOR] in [row[:2] for row in rows]  # the kinds table
    short = {**goldens.SHORT_SET, "train.breakdown_steps": 0}
    conf = goldens.test_conf(tmp_path / "test_conf.yaml", [
        {"case": f"gpt2_tiny:torch:{ACCELERATOR}:1:1", "extern_config": CONFIG, "set": short},
        {"case": f"ppo_tiny:torch:{ACCELERATOR}:1:1", "set": short}])
    cluster = write(tmp_path / "cluster.yaml", "hosts:\n  - {name: localhost, devices: [1]}\n")
    result = cli("run", "--test-conf", str(conf), "--root", str(ROOT), "--cluster", str(cluster),
                 extra_env={**env, **goldens.ONE_THREAD}, timeout=900)
    assert result.returncode == 0, result.stderr + result.stdout
    docs = {doc["case"]["case"]: doc for doc in result.results()}
    assert set(docs) == {"gpt2_tiny", "ppo_tiny"}
    for doc in docs.values():
        assert doc["status"] == "ok" and doc["case"]["vendor"] == VENDOR, doc["reason"]
        (node,) = doc["environment"]["nodes"]
        assert node["environment"][f"{KIND}_plugin"] == {"setup_kind": KIND, "visible_at_setup": "1"}  # PPO's too
        assert node["devices"] == {"count": 3, "command": f"python3 {folder}/smi.py list"}  # {vendor_dir}
        assert node["probes"][f"{KIND}_devices"] == "three test devices"
        assert doc["monitor"]["nodes"][0]["status"]["accelerator"] == "ok (command: python3)"
        assert doc["metrics"]["memory_total_bytes"] == 16 * 2**30 and doc["metrics"]["peak_tflops"] == 2.0
    gpt2 = docs["gpt2_tiny"]
    assert gpt2["case"]["extern_config"] == str(folder / "gpt2_tiny" / "torch" / f"{CONFIG}.yaml")
    assert gpt2["workload"]["train"]["micro_batch_size"] == 4  # the package's config, not the case's 8
    assert not (ROOT / "vendors" / VENDOR).exists()
