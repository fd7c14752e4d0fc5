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
# (torch's wheel carries its own). A changed recipe makes a new base (the image's label says which it has).
PACKAGES = ("python3", "python3-venv", "libgomp1")
BASE_LABEL = "accelbench.base.recipe"  # base_key() of the recipe the image was made from
SUITE, VARIANT = "bookworm", "minbase"
ROOTFS_CACHE = Path("/var/tmp/accelbench-rootfs")  # debootstrapped root filesystems, kept across test runs


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


class EngineUnavailable(RuntimeError):
    """No engine answers and none could be started; the message says why (what a test run reports)."""


def _log_tail(path: Path, since: int, lines: int = 3) -> str:
    """The last lines this start wrote (the log is appended to across runs)."""
    try:
        with open(path, "rb") as f:
            f.seek(since)
            text = f.read().decode(errors="replace")
    except OSError:
        return "(no log)"
    return " | ".join(text.strip().splitlines()[-lines:]) or "(nothing logged)"


def start_engine() -> Engine:
    """An engine that answers, or EngineUnavailable saying why there is none: a broken install must show as
    a reason a reader can act on, never as a quiet skip."""
    for candidate in filter(None, (os.environ.get("DOCKER_HOST"), "unix:///var/run/docker.sock",
                                   f"unix://{PRIVATE_ROOT}/docker.sock")):
        if _answers(candidate):
            return Engine(candidate, None)
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        raise EngineUnavailable("no Docker engine answers and dockerd is not installed "
                                "(./dev test installs docker.io as root)")
    if os.geteuid() != 0:
        raise EngineUnavailable("no Docker engine answers and only root can start dockerd here")
    PRIVATE_ROOT.mkdir(parents=True, exist_ok=True)
    socket_path, log = PRIVATE_ROOT / "docker.sock", PRIVATE_ROOT / "dockerd.log"
    logged_before = log.stat().st_size if log.exists() else 0
    process = subprocess.Popen(
        [dockerd, "--host", f"unix://{socket_path}", "--data-root", str(PRIVATE_ROOT / "root"),
         "--exec-root", str(PRIVATE_ROOT / "exec"), "--pidfile", str(PRIVATE_ROOT / "dockerd.pid")],
        stdout=subprocess.DEVNULL, stderr=open(log, "ab"))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if _answers(f"unix://{socket_path}"):
            return Engine(f"unix://{socket_path}", process)
        if process.poll() is not None:
            raise EngineUnavailable(f"dockerd exited with code {process.returncode}; "
                                    f"{log}: {_log_tail(log, logged_before)}")
        time.sleep(0.5)
    process.terminate()
    raise EngineUnavailable(f"dockerd did not answer within 60 s; {log}: {_log_tail(log, logged_before)}")


def base_key() -> str:
    """What the base is made of (suite, variant, packages, mirror), hashed: the cached root filesystem's folder
    name and the image's label, so a changed recipe never reuses an old base."""
    import hashlib

    recipe = f"{SUITE}|{VARIANT}|{','.join(PACKAGES)}|{MIRROR}"
    return hashlib.sha256(recipe.encode()).hexdigest()[:12]


def ensure_base_image(docker_host: str, cache: Path = ROOTFS_CACHE) -> str:
    """``BASE_IMAGE`` on the engine, made from a debootstrapped bookworm if it is not there yet. The root
    filesystem is kept in ``ROOTFS_CACHE``/bookworm-<key> across runs (delete the folder to rebuild it)."""
    import docker

    client = docker.DockerClient(base_url=docker_host, timeout=600)
    wanted = ",".join(PACKAGES)
    key = base_key()
    try:
        if (client.images.get(BASE_IMAGE).labels or {}).get(BASE_LABEL) == key:
            return BASE_IMAGE
    except docker.errors.ImageNotFound:
        pass
    rootfs = cache / f"bookworm-{key}"
    if not (rootfs / "usr/bin/python3").exists():
        shutil.rmtree(rootfs, ignore_errors=True)
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(["debootstrap", f"--variant={VARIANT}", f"--include={wanted}", SUITE,
                        str(rootfs), MIRROR], check=True, stdout=subprocess.DEVNULL)
    archive = cache / "bookworm.tar"
    subprocess.run(["tar", "-C", str(rootfs), "-cf", str(archive), "."], check=True)
    repository, tag = BASE_IMAGE.split(":")
    client.api.import_image_from_file(str(archive), repository=repository, tag=tag,
                                      changes=[f"LABEL {BASE_LABEL}={key}"])
    archive.unlink()
    client.images.get(BASE_IMAGE)  # raises if the import did not make it
    client.close()
    return BASE_IMAGE
