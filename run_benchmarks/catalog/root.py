"""Where accelbench's tree is: the folder holding cases/ and vendors/ (standard library only, so ``list`` and
``--help`` find it without loading a schema)."""
from __future__ import annotations

import os
from pathlib import Path


def is_root(folder: Path) -> bool:
    return (folder / "cases").is_dir() and (folder / "vendors").is_dir()


def default_root() -> Path:
    """The tree holding cases/ and vendors/: $ACCELBENCH_ROOT, else the current directory or the nearest parent
    that holds them (as git finds its repository), else the checkout accelbench is installed from. So
    `accelbench vendor new` inside a copy of the checkout writes into that copy."""
    env = os.environ.get("ACCELBENCH_ROOT")
    if env:
        return Path(env).resolve()
    here = Path.cwd().resolve()
    found = next((folder for folder in (here, *here.parents) if is_root(folder)), None)
    if found is not None:
        return found
    installed = Path(__file__).resolve().parents[2]  # run_benchmarks/catalog/root.py -> the checkout
    return installed if is_root(installed) else here
