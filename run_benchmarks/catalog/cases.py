"""The case catalogue: ``cases/<case>/case.yaml`` and the vendors' extern configs for it (read by extern.py)."""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from run_benchmarks.catalog import extern
from run_benchmarks.catalog.config_files import CaseFile

from run_benchmarks.catalog.config import CASE_NAME, load_model
from run_benchmarks.catalog.vendor_folders import vendor_folder
from run_benchmarks.errors import UserError


@dataclass(frozen=True)
class ResolvedCase:
    """A case with its ``extends`` chain followed: base first, the named case last."""

    chain: list[tuple[Path, CaseFile]]

    def _last(self, key: str, default=None):
        return next((getattr(f, key) for _, f in reversed(self.chain) if getattr(f, key)), default)

    @property
    def path(self) -> Path:
        return self.chain[-1][0]

    @property
    def frameworks(self) -> list[str]:
        return self._last("frameworks", [])

    @property
    def task(self) -> str:
        return self._last("task", "pretrain")

    @property
    def description(self) -> str:
        return self.chain[-1][1].description

    def layers(self) -> list[tuple[str, dict]]:
        """(source file, workload keys) per file, in the order they apply."""
        return [(str(path), case.workload_layer()) for path, case in self.chain]


class CaseCatalog:
    def __init__(self, cases_dir: Path, vendors_dir: Path):
        self.cases_dir, self.vendors_dir = cases_dir, vendors_dir

    def names(self) -> list[str]:
        return sorted(p.parent.name for p in self.cases_dir.glob("*/case.yaml"))

    def path(self, case: str) -> Path:
        return self.cases_dir / case / "case.yaml"

    def load(self, case: str) -> CaseFile:
        if not CASE_NAME.match(case):  # a name, never a path out of cases/
            raise UserError(f"case {case!r} is not a case name (letters, digits, '_', '.', '-'; no '/')",
                            f"name a folder under {self.cases_dir}, e.g. {', '.join(self.names()[:3])}")
        path = self.path(case)
        if not path.is_file():
            known = self.names()
            close = difflib.get_close_matches(case, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise UserError(f"unknown case {case!r}: {path} does not exist",
                            f"{hint}known cases: {', '.join(known) or '(none)'}")
        return load_model(CaseFile, path)

    def resolve(self, case: str) -> ResolvedCase:
        chain: list[tuple[Path, CaseFile]] = []
        seen: list[str] = []
        name = case
        while name is not None:
            if name in seen:
                raise UserError(f"cases extend each other in a circle: {' -> '.join(seen + [name])}",
                                f"remove 'extends' from one of them ({chain[-1][0]})")
            seen.append(name)
            loaded = self.load(name)
            chain.append((self.path(name), loaded))
            name = loaded.extends
        return ResolvedCase(chain[::-1])

    def extern_dir(self, vendor: str, case: str, framework: str) -> Path:
        """Where the vendor keeps its configs for the case and framework: in its folder, in the checkout or in an
        installed vendor package."""
        return vendor_folder(self.vendors_dir, vendor) / case / framework

    def find_extern(self, name: str, vendor: str, case: str, framework: str) -> tuple[Path, list[str]]:
        """The file ``name`` means for this case (a path, or a YAML or FlagPerf ``.py`` config name in the
        vendor's folder: extern.find), and a note where the choice needs one."""
        return extern.find(name, self.extern_dir(vendor, case, framework), f"{case}/{framework} of vendor {vendor}")

    def read_extern(self, name: str, vendor: str, case: str, framework: str) -> extern.Extern:
        """The extern config ``name`` means for this case, read into workload layers (extern.load)."""
        return extern.load(*self.find_extern(name, vendor, case, framework))
