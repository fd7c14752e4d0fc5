"""The vendor's image for a framework: ``vendors/<vendor>/docker/<framework>_<version>/Dockerfile``.

The tag carries a digest of the build context, so a changed Dockerfile (or
wheel) builds a new image and an unchanged one is reused. A ``requirements.txt``
beside the Dockerfile is downloaded as wheels into ``wheels/`` on this machine
first (``pip download``): the build installs from there with ``--no-index``,
so containers need no package index (air-gapped clusters have none either). The
download is done once per requirements.txt: ``wheels/.requirements`` names the
requirements' digest and the files fetched for it, and while both hold, no pip
runs (a container node's case paid ~3.5 s of CPU for pip to find nothing to do);
change the requirements, or empty ``wheels/``, to fetch again.
"""
from __future__ import annotations

import hashlib
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from run_benchmarks.errors import UserError


FETCHED = ".requirements"  # in wheels/: the requirements' digest, then each file fetched for them


@dataclass(frozen=True)
class ImageSpec:
    tag: str
    context: Optional[Path]  # None: a prebuilt image, pulled or present on the host
    build_args: dict


def context_dir(vendor_dir: Path, framework: str, version: Optional[str]) -> Path:
    docker_dir = vendor_dir / "docker"
    candidates = sorted(docker_dir.glob(f"{framework}_*/Dockerfile"))
    if version:
        exact = docker_dir / f"{framework}_{version}" / "Dockerfile"
        if exact.is_file():
            return exact.parent
        prefixed = [c for c in candidates if c.parent.name.split("_", 1)[1].startswith(version)]
        candidates = prefixed
    if len(candidates) == 1:
        return candidates[0].parent
    known = ", ".join(c.parent.name for c in sorted(docker_dir.glob("*/Dockerfile"))) or "(none)"
    raise UserError(f"no single Dockerfile for {framework} {version or ''} under {docker_dir}",
                    f"add {docker_dir}/{framework}_<version>/Dockerfile, or set frameworks.{framework}.image "
                    f"in {vendor_dir / 'vendor.yaml'}; present: {known}")


def prepare_wheels(context: Path) -> None:
    """``pip download`` the context's requirements.txt into wheels/, unless these requirements were fetched
    there already and every file fetched is still there."""
    requirements = context / "requirements.txt"
    if not requirements.is_file():
        return
    wheels, wanted = context / "wheels", hashlib.sha256(requirements.read_bytes()).hexdigest()
    if _fetched(wheels) == wanted:
        return
    # For this machine's Python and platform: the image's Python must be the same minor version.
    done = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "-r", str(requirements),
                           "-d", str(wheels)],
                          capture_output=True, text=True)
    if done.returncode:
        raise UserError(f"could not download the wheels of {requirements}: {done.stderr.strip()[-500:]}",
                        "check the requirements and that a package index is reachable from this machine")
    files = sorted(p.name for p in wheels.iterdir() if p.is_file() and p.name != FETCHED)
    (wheels / FETCHED).write_text("\n".join([wanted, *files]) + "\n", encoding="utf-8")


def _fetched(wheels: Path) -> Optional[str]:
    """The digest of the requirements whose wheels are all in ``wheels``; None when unknown or one is gone."""
    try:
        digest, *files = (wheels / FETCHED).read_text(encoding="utf-8").split()
    except (OSError, ValueError):
        return None
    return digest if all((wheels / name).is_file() for name in files) else None


def context_digest(context: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in context.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(context)).encode() + b"\0")
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()[:12]


def image_for(vendor: str, vendor_dir: Path, framework: str, version: Optional[str], prebuilt: Optional[str],
              build_args: dict) -> ImageSpec:
    if prebuilt:
        return ImageSpec(prebuilt, None, {})
    context = context_dir(vendor_dir, framework, version)
    prepare_wheels(context)
    return ImageSpec(f"accelbench/{vendor}-{context.name}:{context_digest(context)}".lower(), context, build_args)


def ensure_image(client, image: ImageSpec, host_name: str) -> bool:
    """Build (or pull) the image on this host's engine unless it has it; True when it had to."""
    import docker

    try:
        client.images.get(image.tag)
        return False
    except docker.errors.ImageNotFound:
        pass
    try:
        if image.context is None:
            client.images.pull(image.tag)
        else:
            client.images.build(path=str(image.context), tag=image.tag, buildargs=image.build_args, rm=True,
                                forcerm=True)
    except (docker.errors.BuildError, docker.errors.APIError) as exc:
        raise UserError(f"host {host_name}: could not {'pull' if image.context is None else 'build'} image "
                        f"{image.tag}: {exc}", f"build it by hand to see the full log: docker build "
                        f"{image.context or ''}".strip()) from None
    return True
