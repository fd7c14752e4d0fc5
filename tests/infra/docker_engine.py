"""A Docker engine and a base image for the container tests, with no registry.

The engine: the one that answers (DOCKER_HOST or the default socket), or else a
private ``dockerd`` (Debian's docker.io) on its own socket, stopped afterwards.
The base image ``accelbench-base/bookworm-python``: a Debian bookworm minbase
root filesystem with Python 3 and venv (debootstrap), turned into an image by
``docker import``; built once (about a minute) and then found by tag.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

BASE_IMAGE = "accelbench-base/bookworm-python:latest"
PRIVATE_ROOT = Path("/var/tmp/accelbench-dockerd")
MIRROR = "http://deb.debian.org/debian"
# Debian packages in the base: Python for the workers, and the OpenMP runtime Paddle's CPU wheel links
# (torch's wheel carries its own). A changed list makes a new base (the image's label says which it has).
PACKAGES = ("python3", "python3-venv", "libgomp1")
BASE_LABEL = "accelbench.base.packages"


@dataclass
class Engine:
    docker_host: str
    process: Optional[subprocess.Popen]  # ours to stop, or None when it was already running

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()


def _answers(docker_host: str) -> bool:
    import docker

    try:
        client = docker.DockerClient(base_url=docker_host, timeout=5)
        client.ping()
        client.close()
        return True
    except Exception:  # noqa: BLE001 - any failure means: not this one
        return False


def start_engine() -> Optional[Engine]:
    """An engine that answers, or None when there is none and none can be started here."""
    for candidate in filter(None, (os.environ.get("DOCKER_HOST"), "unix:///var/run/docker.sock",
                                   f"unix://{PRIVATE_ROOT}/docker.sock")):
        if _answers(candidate):
            return Engine(candidate, None)
    dockerd = shutil.which("dockerd")
    if dockerd is None or os.geteuid() != 0:
        return None
    PRIVATE_ROOT.mkdir(parents=True, exist_ok=True)
    socket_path = PRIVATE_ROOT / "docker.sock"
    process = subprocess.Popen(
        [dockerd, "--host", f"unix://{socket_path}", "--data-root", str(PRIVATE_ROOT / "root"),
         "--exec-root", str(PRIVATE_ROOT / "exec"), "--pidfile", str(PRIVATE_ROOT / "dockerd.pid")],
        stdout=subprocess.DEVNULL, stderr=open(PRIVATE_ROOT / "dockerd.log", "ab"))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if _answers(f"unix://{socket_path}"):
            return Engine(f"unix://{socket_path}", process)
        if process.poll() is not None:
            return None
        time.sleep(0.5)
    process.terminate()
    return None


def ensure_base_image(docker_host: str, cache: Path = Path("/var/tmp/accelbench-rootfs")) -> str:
    """``BASE_IMAGE`` on the engine, made from a debootstrapped bookworm if it is not there yet."""
    import docker

    client = docker.DockerClient(base_url=docker_host, timeout=600)
    wanted = ",".join(PACKAGES)
    try:
        if (client.images.get(BASE_IMAGE).labels or {}).get(BASE_LABEL) == wanted:
            return BASE_IMAGE
    except docker.errors.ImageNotFound:
        pass
    rootfs = cache / f"bookworm-{'-'.join(PACKAGES)}"
    if not (rootfs / "usr/bin/python3").exists():
        shutil.rmtree(rootfs, ignore_errors=True)
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(["debootstrap", "--variant=minbase", f"--include={wanted}", "bookworm",
                        str(rootfs), MIRROR], check=True, stdout=subprocess.DEVNULL)
    archive = cache / "bookworm.tar"
    subprocess.run(["tar", "-C", str(rootfs), "-cf", str(archive), "."], check=True)
    repository, tag = BASE_IMAGE.split(":")
    client.api.import_image_from_file(str(archive), repository=repository, tag=tag,
                                      changes=[f"LABEL {BASE_LABEL}={wanted}"])
    archive.unlink()
    client.images.get(BASE_IMAGE)  # raises if the import did not make it
    client.close()
    return BASE_IMAGE
