"""The workload code a remote host needs, copied once per content version: ``training/`` and the
vendors' own code (worker plugins and tool stand-ins an accelerator kind names, ``vendors/*/**.py``).

Remote hosts get ``<work_root>/code/<digest>/``: a changed file makes a new
digest, so runs of different checkouts never mix code, and an unchanged tree is
not copied again.
"""
from __future__ import annotations

import hashlib
from pathlib import Path, PurePosixPath

PACKAGES = ("training", "vendors")


def code_files(root: Path) -> list[Path]:
    """Source files of the workload packages, relative to ``root``, in a stable order."""
    files = []
    for package in PACKAGES:
        files += [p.relative_to(root) for p in sorted((root / package).rglob("*.py")) if "wheels" not in p.parts]
    return files


def code_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for rel in code_files(root):
        digest.update(str(rel).encode() + b"\0" + (root / rel).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def remote_code_root(work_root: str, digest: str) -> PurePosixPath:
    return PurePosixPath(work_root) / "code" / digest


def sync_code(host, root: Path, remote_root: PurePosixPath) -> None:
    """Copy the workload to ``remote_root`` on ``host`` unless a complete copy is there already."""
    marker = remote_root / ".complete"
    if host.exists(marker):
        return
    for rel in code_files(root):
        host.put(root / rel, remote_root / PurePosixPath(*rel.parts))
    host.write_text(marker, "\n".join(str(p) for p in code_files(root)) + "\n")
