"""The vendor's image: rebuilt when its build context changes, reused when not, a prebuilt one used as named,
and a node in a container on a local host (no SSH)."""
from __future__ import annotations

import shutil
import zipfile

import docker
import pytest

from run_benchmarks.backends.runtimes import images
from run_benchmarks.errors import UserError
from run_benchmarks.catalog.vendors import VendorRegistry

from .conftest import ROOT, write
from .checks import assert_complete_ok
from .goldens import SHORT, SHORT_STEPS, SHORT_WARMUP


def _spec(vendors_dir) -> images.ImageSpec:
    runtime = VendorRegistry(vendors_dir).vendors["cpu"].frameworks["torch"]
    return images.image_for("cpu", vendors_dir / "cpu", "torch", "2.13", runtime.image, runtime.container.build_args)


def test_an_image_is_reused_while_its_context_is_unchanged_and_rebuilt_when_it_changes(engine, root,
                                                                                      cpu_torch_image):
    client = docker.DockerClient(base_url=engine.docker_host, timeout=900)
    try:
        same = _spec(root / "vendors")  # a copy of the checkout's context: the same digest, the same tag
        assert same.tag == cpu_torch_image
        assert images.ensure_image(client, same, "test engine") is False  # there already: no build
        dockerfile = root / "vendors/cpu/docker/torch_2.13/Dockerfile"
        dockerfile.write_text(dockerfile.read_text() + "# a vendor's edit\n")
        changed = _spec(root / "vendors")
        assert changed.tag != same.tag and changed.tag.startswith("accelbench/cpu-torch_2.13:")
        try:
            assert images.ensure_image(client, changed, "test engine") is True  # a new context: built
            assert images.ensure_image(client, changed, "test engine") is False  # and then reused
            client.images.get(changed.tag)
        finally:
            client.images.remove(changed.tag, force=True)
    finally:
        client.close()


def test_a_prebuilt_image_runs_a_node_in_a_container_on_a_local_host(cli, engine, root, tmp_path,
                                                                      cpu_torch_image):
    """The vendor names an image that is on the engine (as a registry image would be after a pull): it is used
    as named and nothing is built; the host is this machine, reached without SSH."""
    # A real copy: the container mounts the tree it runs from, and a link would point outside the mount.
    shutil.copytree(ROOT / "training", root / "training", ignore=shutil.ignore_patterns("__pycache__"))
    client = docker.DockerClient(base_url=engine.docker_host)
    prebuilt = "accelbench-test/prebuilt-torch:1"
    client.images.get(cpu_torch_image).tag("accelbench-test/prebuilt-torch", "1")
    try:
        vendor = root / "vendors/cpu/vendor.yaml"
        vendor.write_text(vendor.read_text().replace("  torch:\n    env: {}", f"  torch:\n    env: {{}}\n"
                                                                            f"    image: {prebuilt}", 1))
        assert f"image: {prebuilt}" in vendor.read_text()
        cluster = write(tmp_path / "cluster.yaml", "hosts:\n  - name: local0\n    runtime: container\n"
                                                   f"    docker_host: {engine.docker_host}\n")
        before = {image.id for image in client.images.list()}
        result = cli("run", "gpt2_tiny:torch_2.13:cpu:1:1", *SHORT, "--root", str(root), "--cluster", str(cluster),
                     timeout=900)
        assert result.returncode == 0, result.stderr + result.stdout
        (doc,) = result.results()
        assert_complete_ok(doc, world_size=1, steps=SHORT_STEPS, warmup=SHORT_WARMUP, checkout=root, in_image=True)
        (node,) = doc["environment"]["nodes"]
        assert node["host"] == "local0" and node["image"] == prebuilt
        # Other people's runs on this shared machine are rightly warned of; nothing else may be.
        assert [w for w in doc["warnings"] if not w.startswith("another run's workers")] == []
        assert doc["monitor"]["nodes"][0]["status"]["host"] == "ok (host)"
        assert node["image_id"] == client.images.get(prebuilt).id
        assert {image.id for image in client.images.list()} == before  # nothing was built
    finally:
        client.images.remove(prebuilt)
        client.close()


def _wheel(folder, name: str, version: str):
    """A minimal pure-Python wheel made here (no package index is needed to fetch it)."""
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as whl:
        whl.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        whl.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        whl.writestr(f"{info}/RECORD", "")
    return path


def test_the_wheels_of_unchanged_requirements_are_fetched_once(tmp_path):
    """pip fetches the requirements' wheels into wheels/ once; while the requirements and those files stay, no
    pip runs (its source is gone, so a second pip would fail); new requirements fetch again."""
    source, context = tmp_path / "source", tmp_path / "context"
    source.mkdir(), context.mkdir()
    first = _wheel(source, "abtestpkg", "1.0")
    (context / "requirements.txt").write_text(f"{first}\n")
    images.prepare_wheels(context)
    assert (context / "wheels" / first.name).is_file()
    digest = images.context_digest(context)
    first.unlink()
    images.prepare_wheels(context)  # the same requirements, their wheel there: nothing to fetch
    assert images.context_digest(context) == digest
    (context / "requirements.txt").write_text(f"{first}\n{source / 'abtestdep-1.0-py3-none-any.whl'}\n")
    with pytest.raises(UserError, match="could not download the wheels"):
        images.prepare_wheels(context)  # changed requirements: pip runs (and finds no abtestdep)
    (context / "requirements.txt").write_text(f"{first}\n")
    (context / "wheels" / first.name).unlink()
    with pytest.raises(UserError, match="could not download the wheels"):
        images.prepare_wheels(context)  # a fetched file gone: pip runs again
