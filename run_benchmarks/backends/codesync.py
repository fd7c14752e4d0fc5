"""The workload code a remote host needs, copied once per content version: ``training/`` and the
vendors' own code (worker plugins and tool stand-ins an accelerator kind names, ``vendors/*/**.py``), the
installed vendor packages' too (catalog/vendor_folders.py), each under ``vendors/<vendor>/``: there a node's
``{vendor_dir}`` finds it.

Remote hosts get ``<work_root>/code/<digest>/``: a changed file makes a new
digest, so runs of different checkouts never mix code, and an unchanged tree is
not copied again.
"""
from __future__ import annotations

import hashlib
from pathlib import Path, PurePosixPath

from run_benchmarks.catalog.vendor_folders import package_vendors

PACKAGES = ("training", "vendors")


def code_files(root: Path) -> list[tuple[Path, PurePosixPath]]:
    """Source files of the workload packages and their place under the code root, in a stable order."""
    files = []
    for package in PACKAGES:
        files += [(p, PurePosixPath(*p.relative_to(root).parts)) for p in sorted((root / package).rglob("*.py"))
                  if "wheels" not in p.parts]
    for vendor in package_vendors():
        files += [(p, PurePosixPath("vendors", vendor.name, *p.relative_to(vendor.path).parts))
                  for p in sorted(vendor.path.rglob("*.py")) if "wheels" not in p.parts]
    return files


def code_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for source, rel in code_files(root):
        digest.update(str(rel).encode() + b"\0" + source.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def remote_code_root(work_root: str, digest: str) -> PurePosixPath:
    return PurePosixPath(work_root) / "code" / digest


def sync_code(host, root: Path, remote_root: PurePosixPath) -> None:
    """Copy the workload to ``remote_root`` on ``host`` unless a complete copy is there already."""
    marker = remote_root / ".complete"
    if host.exists(marker):
        return
    files = code_files(root)
    for source, rel in files:
        host.put(source, remote_root / rel)
    host.write_text(marker, "\n".join(str(rel) for _, rel in files) + "\n")
