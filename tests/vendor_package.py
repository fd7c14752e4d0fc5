"""A throwaway vendor package, as a vendor would ship one: the test kind's folder (tests/vendors/testkind) renamed
to its own names, every checkout path written as ``{vendor_dir}``, an extern config beside it, and a
pyproject.toml declaring the entry point ``accelbench.vendors``. Built and installed by pip into a scratch
folder (``--target``), which the test then puts on the Python path: nothing of the checkout changes."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .conftest import ROOT

TESTKIND = ROOT / "tests" / "vendors" / "testkind"
VENDOR, KIND, ACCELERATOR = "pkgvendor", "pkgkind", "PK1"
DISTRIBUTION, MODULE = "accelbench-pkgvendor", "accelbench_pkgvendor"
# The package's extern config for gpt2_tiny on one PK1: half the case's micro-batch (8), so a run shows it read it.
CONFIG = "config_halfPK1x1x1"
CONFIG_TEXT = "description: the package's own config, 4 sequences per step\ntrain:\n  micro_batch_size: 4\n"
PYPROJECT = f'''[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{DISTRIBUTION}"
version = "0.1"

[project.entry-points."accelbench.vendors"]
{VENDOR} = "{MODULE}:VENDOR_DIR"

[tool.setuptools]
packages = ["{MODULE}"]

[tool.setuptools.package-data]
{MODULE} = ["vendor/**/*"]
'''
INIT = '"""The pkgvendor folder for accelbench."""\nimport os\n\nVENDOR_DIR = os.path.join(os.path.dirname(__file__), ' \
       '"vendor")\n'


def renamed(text: str) -> str:
    """The test kind's words as the package's: its own kind, variable and accelerator, and ``{vendor_dir}``."""
    return (text.replace("{code_root}/vendors/testkind", "{vendor_dir}").replace("worker_plugin: plugin.py",
                                                                                "worker_plugin: '{vendor_dir}/plugin.py'")
            .replace("TESTKIND", "PKGKIND").replace("testkind", KIND).replace("TK1", ACCELERATOR))


def write_source(folder: Path, vendor: str = VENDOR) -> Path:
    """The package's source tree under ``folder`` (``vendor``: the entry point's name)."""
    package = folder / MODULE
    (package / "vendor").mkdir(parents=True)
    (folder / "pyproject.toml").write_text(PYPROJECT.replace(f"\n{VENDOR} = ", f"\n{vendor} = "))
    (package / "__init__.py").write_text(INIT)
    for source in TESTKIND.iterdir():
        if source.is_file():
            (package / "vendor" / source.name).write_text(renamed(source.read_text()))
    config = package / "vendor" / "gpt2_tiny" / "torch" / f"{CONFIG}.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(CONFIG_TEXT)
    return folder


def install(source: Path, target: Path) -> Path:
    """``pip install --no-build-isolation --no-deps --target``: the scratch folder to put on the Python path."""
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-deps",
                           "--no-index", "--target", str(target), str(source)], capture_output=True, text=True,
                          timeout=300, cwd=source)
    assert done.returncode == 0, done.stdout + done.stderr
    return target
