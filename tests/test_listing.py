"""``accelbench list`` reads the fields it shows as plain YAML (catalog/listing.py) and ``list --check``
validates every file: the rows match what the schemas read, a malformed field or a YAML error names its file,
and the files' words are printed as they are (never read as rich markup)."""
from __future__ import annotations

from run_benchmarks.catalog.cases import CaseCatalog
from run_benchmarks.catalog.listing import read_listing
from run_benchmarks.catalog.vendors import VendorRegistry

from .conftest import ROOT, write

VENDOR = """description: a vendor [with brackets]
accelerators:
  X1: {kind: cpu, memory_gib: 16, peak_tflops: {fp32: 2.5}}
"""


def _tree(root, cases: dict[str, str]):
    for name, text in cases.items():
        write(root / "cases" / name / "case.yaml", text)
    write(root / "vendors" / "acme" / "vendor.yaml", VENDOR)
    return root


def test_the_rows_are_what_the_schemas_read_for_every_shipped_file():
    listing = read_listing(ROOT / "cases", ROOT / "vendors")
    catalog, vendors = CaseCatalog(ROOT / "cases", ROOT / "vendors"), VendorRegistry(ROOT / "vendors")
    assert listing.problems == []
    assert [row[0] for row in listing.cases] == catalog.names()
    for name, task, frameworks, description in listing.cases:
        case = catalog.resolve(name)  # extends followed as a run follows it
        assert (task, frameworks, description) == (case.task, ", ".join(case.frameworks), case.description), name
    assert [(h, v, k) for h, v, k, *_ in listing.hardware] == \
        [(name, hw.vendor, hw.spec.kind) for name, hw in sorted(vendors.hardware.items())]
    assert [row[:3] for row in listing.kinds] == [
        (name, "accelbench", f"{kind.torch_device} / {kind.paddle_device}") for name, kind in vendors.kinds.items()]
    assert [row[0] for row in listing.vendors] == sorted(vendors.vendors)


def test_a_malformed_shown_field_is_named_with_its_file_and_check_gives_the_fix(accelbench, tmp_path):
    root = _tree(tmp_path / "tree", {
        "base": "description: base\ntask: pretrain\nframeworks: [torch]\nmodel: {}\ntrain: {}\n",
        "child": "extends: base\ndescription: 'shapes [8192,8192] and --set \"micro.dtypes=[bf16,fp16]\"'\n",
        "bad": "description: bad\nframeworks: torch\n",
        "orphan": "extends: gone\n"})
    listed = accelbench("list", "--root", str(root))
    assert listed.returncode == 2, listed.stderr
    assert f"{root}/cases/bad/case.yaml: frameworks: expected list, got str" in listed.stdout
    assert f"{root}/cases/orphan/case.yaml: extends 'gone', which has no case.yaml" in listed.stdout
    assert "accelbench list --check" in listed.stdout
    # child inherits task and frameworks; its description is printed as written, brackets and all
    assert "micro.dtypes=[bf16,fp16]" in listed.stdout and "a vendor [with brackets]" in listed.stdout
    child = next(line for line in listed.stdout.splitlines() if "│ child" in line)
    assert "pretrain" in child and "torch" in child
    checked = accelbench("list", "--check", "--root", str(root))
    assert checked.returncode == 2 and "Traceback" not in checked.stderr
    assert "cases/bad/case.yaml" in checked.stderr and "frameworks" in checked.stderr


def test_a_yaml_error_stops_list_naming_the_file_and_line(accelbench, tmp_path):
    root = _tree(tmp_path / "tree", {"ok": "description: fine\n", "broken": "description: [unclosed\n"})
    listed = accelbench("list", "--root", str(root))
    assert listed.returncode == 2 and "Traceback" not in listed.stderr
    assert f"{root}/cases/broken/case.yaml:" in listed.stderr and "YAML syntax error" in listed.stderr


def test_check_validates_the_shipped_tree(accelbench):
    checked = accelbench("list", "--check", "--root", str(ROOT))
    assert checked.returncode == 0, checked.stderr
    shipped = len(list((ROOT / "cases").glob("*/case.yaml"))) + len(VendorRegistry(ROOT / "vendors").vendors)
    assert f"checked {shipped} case and vendor files against their schemas: ok" in checked.stdout
