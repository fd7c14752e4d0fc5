"""docs/vendor-onboarding.md, "A first run on this machine", followed as written: a new vendor's kind with the
CPU standing in for its device and a stand-in for its tool (the test kind's smi.py) plans, and ``vendor check
--run-tools`` shows the count and readings it parsed from the stand-in. The guide's commands and YAML are read
from the page itself, so the page and this test cannot drift apart. The real run the page promises (``1 ok``)
is the test kind's, run end to end in tests/test_kind_hosts.py; here everything is in this process."""
from __future__ import annotations

import re
import shlex
import shutil

import pytest
import yaml

from .conftest import ROOT
from .test_vendors import fill_template

GUIDE = ROOT / "docs/vendor-onboarding.md"


def guide_blocks() -> list[tuple[str, str]]:
    """(language, text) of each code block of the section."""
    section = GUIDE.read_text().split("## 4. A first run on this machine", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```(\w+)\n(.*?)```", section, re.S)


def commands(block: str) -> list[list[str]]:
    return [shlex.split(line.split("  #")[0]) for line in block.splitlines() if line.strip()]


@pytest.fixture
def acme(accelbench, root):
    """vendors/acme from the template, filled in, then the guide's section applied to it."""
    assert accelbench("vendor", "new", "acme", "--root", str(root)).returncode == 0
    vendor = root / "vendors/acme/vendor.yaml"
    vendor.write_text(fill_template(vendor.read_text()))
    (_, copy), (language, added), (_, runs) = guide_blocks()
    assert commands(copy) == [["cp", "tests/vendors/testkind/smi.py", "vendors/acme/standin_smi.py"]]
    shutil.copy(ROOT / "tests/vendors/testkind/smi.py", root / "vendors/acme/standin_smi.py")
    assert language == "yaml"
    spec = yaml.safe_load(vendor.read_text())
    for key, entries in yaml.safe_load(added).items():  # "added beside yours under kinds: and accelerators:"
        spec[key] = {**spec[key], **entries}
    vendor.write_text(yaml.safe_dump(spec, sort_keys=False))
    return commands(runs)


def test_the_guides_local_kind_plans_and_its_tools_parse_here(accelbench, root, acme):
    dry, real, report, check = acme
    assert dry[:3] == ["accelbench", "run", "gpt3_tiny:torch:X1_local:1:2"] and "--dry-run" in dry
    assert real == dry[:3] and report == ["accelbench", "report", "last"]
    assert check == ["accelbench", "vendor", "check", "acme", "--run-tools"]
    planned = accelbench(*dry[1:], "--root", str(root))
    assert planned.returncode == 0, planned.stdout + planned.stderr
    assert "vendor acme, hardware X1_local (kind acme_local)" in planned.stdout
    assert "counted by" in planned.stdout and "standin_smi.py list" in planned.stdout
    checked = accelbench(*check[1:], "--root", str(root))
    assert checked.returncode == 0, checked.stdout
    out = " ".join(checked.stdout.split())
    assert "kinds.acme_local.device_count[0]" in out and "3 device(s)" in out
    assert "device 1 (tk-1): util_percent 41, mem_used_bytes 2.0 GiB, power_w 71.5" in out  # the columns, parsed
