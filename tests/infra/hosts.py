"""The session's test hosts, started once and shared by every module: an sshd cluster of three hosts on
127.0.0.2-4, a Docker engine (an existing one, or a private dockerd) with the debootstrapped base image,
and the cpu vendor's torch image by the exact tag the runtime computes. Stopped at the session's end."""
from __future__ import annotations

import socket
from pathlib import Path

import pytest

from .sshd import SSHD, start_sshd_cluster

ROOT = Path(__file__).resolve().parent.parent.parent


def free_port(address: str = "127.0.0.2") -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    """Three SSH hosts h0, h1, h2 (each its own host key, trusted through one known_hosts file)."""
    if not Path(SSHD).exists():
        pytest.skip("no sshd (./dev test installs openssh-server)")  # a failure under CI=true
    cluster = start_sshd_cluster(tmp_path_factory.mktemp("sshd"), count=3, port=free_port())
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def engine():
    """A Docker engine (started here if none answers) with the base image the vendors' images build on."""
    from .docker_engine import EngineUnavailable, ensure_base_image, start_engine

    try:
        started = start_engine()
    except EngineUnavailable as exc:
        pytest.skip(f"no Docker engine: {exc}")  # a failure under CI=true (see pytest_runtest_makereport)
    try:
        ensure_base_image(started.docker_host)
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="session")
def cpu_torch_image(engine) -> str:
    """The cpu vendor's torch_2.13 image by the exact tag the runtime computes (built here when missing), so a
    test that needs it does not depend on the tests before it, nor take a stale image with a similar name."""
    import docker

    from run_benchmarks.backends.runtimes import images
    from run_benchmarks.catalog.vendors import VendorRegistry

    vendor = VendorRegistry(ROOT / "vendors").vendors["cpu"]
    runtime = vendor.frameworks["torch"]
    spec = images.image_for("cpu", ROOT / "vendors" / "cpu", "torch", "2.13", runtime.image,
                            runtime.container.build_args)
    client = docker.DockerClient(base_url=engine.docker_host, timeout=900)
    try:
        images.ensure_image(client, spec, "test engine")
    finally:
        client.close()
    return spec.tag


@pytest.fixture
def accelbench_containers(engine, tmp_path):
    """This test's containers still on the engine: node containers whose log folder is under this test's
    tmp_path, and probe containers made since the test began. Leftovers of other runs do not count."""
    import docker

    from run_benchmarks.backends.runtimes.docker import LABEL_LOG

    client = docker.DockerClient(base_url=engine.docker_host)
    before = {c.id for c in client.containers.list(all=True, filters={"label": "accelbench"})}

    def mine(folder: Path = tmp_path) -> list[str]:
        found = []
        for c in client.containers.list(all=True, filters={"label": "accelbench"}):
            log_dir = c.labels.get(LABEL_LOG)
            if (log_dir and log_dir.startswith(str(folder))) or (log_dir is None and c.id not in before):
                found.append(c.name)
        return found

    yield mine
    client.close()
