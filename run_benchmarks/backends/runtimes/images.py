"""The vendor's image for a framework: ``vendors/<vendor>/docker/<framework>_<version>/Dockerfile``.

The tag carries a digest of the build context, so a changed Dockerfile (or
wheel) builds a new image and an unchanged one is reused. A ``requirements.txt``
beside the Dockerfile is downloaded as wheels into ``wheels/`` on this machine
first (``pip download``): the build installs from there with ``--no-index``,
so containers need no package index (air-gapped clusters have none either).
"""
from __future__ import annotations

import hashlib
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from run_benchmarks.errors import UserError


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
    """``pip download`` the context's requirements.txt into wheels/ (a no-op when they are there)."""
    requirements = context / "requirements.txt"
    if not requirements.is_file():
        return
    # For this machine's Python and platform: the image's Python must be the same minor version.
    done = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "-r", str(requirements),
                           "-d", str(context / "wheels")],
                          capture_output=True, text=True)
    if done.returncode:
        raise UserError(f"could not download the wheels of {requirements}: {done.stderr.strip()[-500:]}",
                        "check the requirements and that a package index is reachable from this machine")


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
