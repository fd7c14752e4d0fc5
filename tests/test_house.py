"""The house's rules, from the code's own imports: the import contracts of pyproject.toml (import-linter:
the orchestrator's layers, the two halves meeting only in training/contract; and the same contracts checked
here on the imports by name import-linter cannot see: import_module, __import__, the registries' lazy paths),
no import cycle between modules (imports inside functions, under TYPE_CHECKING and by name count), and files
short enough to read, tests/ included."""
from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from importlinter.cli import lint_imports

from .runner import ROOT

HALVES = ("run_benchmarks", "training")


def lint(root: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` on the tree at ``root`` (a subprocess, so it imports that tree and not this one)."""
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True))"
    return subprocess.run([sys.executable, "-c", code], cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root), "COLUMNS": "200"},  # no line wrapped
                          capture_output=True, text=True, timeout=120)


def test_the_import_contracts_hold():
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        assert lint_imports(no_cache=True) == 0
    finally:
        os.chdir(cwd)


def test_the_contracts_catch_a_forbidden_import(tmp_path):
    """A copy of the tree where the results import the CLI, the orchestrator a worker module, the store a view
    (up results/' own layers), and a module sits in results/ outside its packages: each contract reports it."""
    for part in (*HALVES, "pyproject.toml"):
        source = ROOT / part
        (shutil.copytree(source, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
         if source.is_dir() else shutil.copy(source, tmp_path / part))
    analyze = tmp_path / "run_benchmarks/results/figures/analyze.py"
    analyze.write_text(analyze.read_text() + "\n\ndef _late():\n    from run_benchmarks.cli import main  # noqa\n")
    figures = tmp_path / "run_benchmarks/results/figures/task.py"
    figures.write_text(figures.read_text() + "\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                       "    from training import harness  # noqa\n")
    copy = tmp_path / "run_benchmarks/results/store/copy.py"
    copy.write_text(copy.read_text() + "\n\ndef _late():\n"
                    "    from run_benchmarks.results.report import summary  # noqa\n")
    (tmp_path / "run_benchmarks/results/stray.py").write_text('"""A module of no package of results/."""\n')
    broken = lint(tmp_path)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "run_benchmarks.results.figures.analyze -> run_benchmarks.cli" in broken.stdout
    assert "run_benchmarks.results.figures.task -> training.harness" in broken.stdout
    assert "run_benchmarks.results.store.copy -> run_benchmarks.results.report.summary" in broken.stdout
    assert "not listed as layers:\n\n- run_benchmarks.results.stray\n" in broken.stdout


def test_every_part_of_training_but_the_contract_is_forbidden_to_the_orchestrator():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    parts = {f"training.{p.stem if p.suffix == '.py' else p.name}" for p in (ROOT / "training").iterdir()
             if (p.suffix == ".py" or (p / "__init__.py").is_file()) and p.name != "__init__.py"}
    parts.discard("training.contract")
    for contract in contracts:
        if contract["type"] == "forbidden" and contract["forbidden_modules"][0].startswith("training."):
            assert set(contract["forbidden_modules"]) == parts, contract["name"]


def _modules(root: Path) -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for half in HALVES:
        for path in (root / half).rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[:2] == ["training", "run_benchmarks"]:
                continue  # FlagPerf's own entry scripts, no package: not part of the worker half
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


# A registry's built-in entry, "package.module:attribute" (training/contract/registry.py): an import by name.
_LAZY_PATH = re.compile(r"^((?:run_benchmarks|training)(?:\.\w+)+):\w+$")


def _literal(node: ast.AST, name: str) -> str | None:
    """A string the code spells out: a literal, or f"{__name__}..." in module ``name``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and len(node.values) == 2 and isinstance(node.values[0], ast.FormattedValue) \
            and isinstance(node.values[0].value, ast.Name) and node.values[0].value.id == "__name__" \
            and isinstance(node.values[1], ast.Constant):
        return name + str(node.values[1].value)
    return None


def imports_by_name(tree: ast.AST, name: str) -> set[str]:
    """The modules a module loads by name: ``importlib.import_module("x")``, ``import_module("x")`` and
    ``__import__("x")`` with a literal, and the registries' lazy paths ("x:attribute"); f"{__name__}.x" spells
    one too."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                or (isinstance(node.func, ast.Name) and node.func.id in ("import_module", "__import__"))):
            module = _literal(node.args[0], name)
            if module is not None:
                found.add(module)
        match = _LAZY_PATH.match(_literal(node, name) or "")
        if match:
            found.add(match.group(1))
    return found


def module_imports(root: Path = ROOT, by_name_only: bool = False) -> dict[str, set[str]]:
    """Each module of both halves -> the modules it imports, wherever the import statement sits, and those it
    loads by name (``imports_by_name``); ``by_name_only``: those alone (what import-linter cannot see)."""
    modules = _modules(root)

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(), str(path))
        targets: set[str] = set(imports_by_name(tree, name))
        for node in ast.walk(tree) if not by_name_only else ():
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = package
                for _ in range(max(node.level - 1, 0)):
                    base = base.rpartition(".")[0]
                source = (f"{base}.{node.module}" if node.module else base) if node.level else node.module or ""
                targets |= {f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names}
        edges[name] = {t for t in map(known, targets) if t and t != name}
    return edges


def _within(module: str, packages) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def contract_breaches(edges: dict[str, set[str]], root: Path = ROOT) -> list[str]:
    """The import contracts of pyproject.toml (forbidden and layers) checked on ``edges``: import-linter reads
    import statements only, so the imports by name are checked here against the same contracts."""
    contracts = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    found = []
    for contract in contracts:
        if contract["type"] == "forbidden":
            found += [f"{source} -> {target} ({contract['name']})" for source, targets in sorted(edges.items())
                      if _within(source, contract["source_modules"]) for target in sorted(targets)
                      if _within(target, contract["forbidden_modules"])]
        elif contract["type"] == "layers":
            layers = [re.split(r"\s*[|:]\s*", layer) for layer in contract["layers"]]
            within = contract.get("containers") or [""]  # a container's layers are named relative to it
            rank = {f"{c}.{m}" if c else m: i for i, layer in enumerate(layers) for m in layer for c in within}
            for source, targets in sorted(edges.items()):
                mine = next((rank[m] for m in rank if _within(source, [m])), None)
                for target in sorted(targets):
                    theirs = next((rank[m] for m in rank if _within(target, [m])), None)
                    if mine is not None and theirs is not None and theirs < mine:
                        found.append(f"{source} -> {target} ({contract['name']})")
    return found


def test_the_contracts_hold_for_imports_by_name():
    assert contract_breaches(module_imports(by_name_only=True)) == []


def test_an_import_by_name_across_the_halves_or_up_the_layers_fails_the_check(tmp_path):
    """A copy of the tree where the orchestrator loads a worker module with import_module, names one in a
    registry's lazy path, and the results load the CLI with __import__ and, from the figures, a view with
    import_module (up results/' own layers): each is reported."""
    for part in (*HALVES, "pyproject.toml"):
        source = ROOT / part
        (shutil.copytree(source, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
         if source.is_dir() else shutil.copy(source, tmp_path / part))
    figures = tmp_path / "run_benchmarks/results/figures/task.py"
    figures.write_text(figures.read_text() + "\n\ndef _late():\n    import importlib\n    return "
                       "importlib.import_module('training.harness'), __import__('run_benchmarks.cli.main'), "
                       "importlib.import_module('run_benchmarks.results.report.summary')\n")
    kinds = tmp_path / "run_benchmarks/catalog/kinds.py"
    kinds.write_text(kinds.read_text() + '\nKINDS.register("stray", "training.torch.device:TorchDevice")\n')
    breaches = contract_breaches(module_imports(tmp_path, by_name_only=True), tmp_path)
    assert "run_benchmarks.results.figures.task -> training.harness (the orchestrator imports from training/ only " \
           "its contract package)" in breaches
    assert "run_benchmarks.catalog.kinds -> training.torch.device (the orchestrator imports from training/ only " \
           "its contract package)" in breaches
    assert any(b.startswith("run_benchmarks.results.figures.task -> run_benchmarks.cli.main (the orchestrator's")
               for b in breaches)
    assert "run_benchmarks.results.figures.task -> run_benchmarks.results.report.summary (results/ in layers by " \
           "job: each package imports only those below it)" in breaches
    assert len(breaches) == 4, breaches


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_imports_itself_through_others():
    assert cycles(module_imports()) == []


def test_the_cycle_finder_finds_a_cycle_through_a_lazy_import():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_file_is_over_400_lines_and_one_over_300_says_why():
    """Both halves; the 400-line limit holds for tests/ too (tests/infra/ included)."""
    long = [f"{path.relative_to(ROOT)} ({n})" for path in (ROOT / "tests").rglob("*.py")
            if (n := len(path.read_text().splitlines())) > 400]
    unexplained = []
    for half in HALVES:
        for path in (ROOT / half).rglob("*.py"):
            lines = len(path.read_text().splitlines())
            if lines > 400:
                long.append(f"{path.relative_to(ROOT)} ({lines})")
            elif lines > 300 and "Over 300 lines" not in (ast.get_docstring(ast.parse(path.read_text())) or ""):
                unexplained.append(f"{path.relative_to(ROOT)} ({lines})")
    assert long == [] and unexplained == []
