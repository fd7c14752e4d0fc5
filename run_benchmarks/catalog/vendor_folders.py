"""Where each vendor's folder is: ``vendors/<vendor>/`` in the checkout, or an installed package's.

A vendor ships its folder (vendor.yaml, extern configs, Dockerfiles, worker plugin, stand-in tools) as a pip
package that declares an entry point in the group ``accelbench.vendors``: its name is the vendor's, its value
(``module:attribute``) names the folder's path, e.g. in the package's pyproject.toml::

    [project.entry-points."accelbench.vendors"]
    acme = "acme_accelbench:VENDOR_DIR"     # VENDOR_DIR = os.path.join(os.path.dirname(__file__), "vendor")

So a vendor adds its chips with no fork and no file of the checkout changed. Both kinds of folder are read
the same way by everything that reads a vendor (catalog/vendors.py, cases.py, listing.py, the references,
``vendor check``); a name both declare is refused, naming both. Standard library only (``list`` stays fast):
loading an entry point imports the package's module, as installing it already trusted it to.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Optional

from run_benchmarks.errors import UserError

GROUP = "accelbench.vendors"
TEMPLATE = "template"  # vendors/template: the scaffold `vendor new` copies, not a vendor
VENDOR_FILE = "vendor.yaml"


@dataclass(frozen=True)
class VendorFolder:
    name: str
    path: Path
    package: Optional[str] = None  # "<distribution> <version> (entry point <name> = <module:attribute>)"

    @property
    def source(self) -> str:
        """Where the vendor comes from, as ``list`` shows it."""
        return f"package {self.package.split(' (')[0]}" if self.package else f"vendors/{self.name}"


def vendor_folders(vendors_dir: Path) -> dict[str, VendorFolder]:
    """Every vendor by name: the checkout's folders that hold a vendor.yaml (``template`` excepted), then each
    installed package's; sorted by name."""
    found = {p.parent.name: VendorFolder(p.parent.name, p.parent)
             for p in sorted(vendors_dir.glob(f"*/{VENDOR_FILE}")) if p.parent.name != TEMPLATE}
    for folder in package_vendors():
        if folder.name in found:
            other = found[folder.name]
            raise UserError(f"vendor {folder.name!r} is declared twice: by {describe(other)} and by "
                            f"{describe(folder)}",
                            f"uninstall one, or rename one (the folder under {vendors_dir}, or the package's "
                            f"entry point in group {GROUP})")
        found[folder.name] = folder
    return dict(sorted(found.items()))


def vendor_folder(vendors_dir: Path, vendor: str) -> Path:
    """The folder of ``vendor``; for a name nobody declares, where the checkout would hold it (the path an error
    message names)."""
    folder = vendor_folders(vendors_dir).get(vendor)
    return folder.path if folder else vendors_dir / vendor


def describe(folder: VendorFolder) -> str:
    return f"the package {folder.package} at {folder.path}" if folder.package else f"the folder {folder.path}"


def package_vendors() -> tuple[VendorFolder, ...]:
    """The vendors installed packages declare, for the current ``sys.path``."""
    return _package_vendors(tuple(sys.path))


@lru_cache(maxsize=4)
def _package_vendors(path: tuple[str, ...]) -> tuple[VendorFolder, ...]:
    folders: dict[str, VendorFolder] = {}
    for point in sorted(metadata.entry_points(group=GROUP), key=lambda p: (p.name, p.value)):
        dist = getattr(point, "dist", None)
        package = (f"{dist.name} {dist.version}" if dist is not None else "an unnamed distribution") + \
            f" (entry point {point.name} = {point.value})"
        folder = VendorFolder(point.name, _folder_of(point, package), package)
        if point.name in folders:
            raise UserError(f"vendor {point.name!r} is declared twice: by {describe(folders[point.name])} and by "
                            f"{describe(folder)}", "uninstall one of the two packages")
        folders[point.name] = folder
    return tuple(folders.values())


def _folder_of(point: metadata.EntryPoint, package: str) -> Path:
    fix = (f"the entry point must name a str or path attribute holding the folder of {VENDOR_FILE}, e.g. "
           f"VENDOR_DIR = os.path.join(os.path.dirname(__file__), 'vendor'); or uninstall the package")
    try:
        value = point.load()
    except Exception as exc:  # noqa: BLE001 - whatever the package's import raises is its to fix
        raise UserError(f"vendor package {package}: loading the entry point failed: {type(exc).__name__}: {exc}",
                        fix) from None
    if not isinstance(value, (str, os.PathLike)):
        raise UserError(f"vendor package {package}: the entry point names a {type(value).__name__}, not a path",
                        fix)
    folder = Path(value).resolve()
    if not (folder / VENDOR_FILE).is_file():
        raise UserError(f"vendor package {package}: {folder} holds no {VENDOR_FILE}", fix)
    return folder
