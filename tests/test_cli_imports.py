"""The ``accelbench`` command as a process of its own: what it imports before a command needs it, and the exit
codes the interpreter reports (the other CLI tests call it in this process, through the ``accelbench`` fixture).

matplotlib and numpy (HTML reports), torch and paddle (workers, calibrate) and paramiko (SSH hosts) take most
of a second to import: ``--help``, ``list`` and a dry run need none of them; ``list`` needs no pydantic either
(building the schemas' models took most of its start-up). ``--help`` needs no command's
module at all: the parser is built from the standard library (cli/arguments.py), so neither pydantic, rich
nor YAML is loaded (start-up figures: docs/benchmarks.md, "Start-up", from benchmarks/harness_overhead.py).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .conftest import ROOT

HEAVY = ("matplotlib", "numpy", "torch", "paddle", "paramiko")
COMMAND_LIBRARIES = ("pydantic", "rich", "yaml")  # what a command loads, and --help never does

_COMMANDS = """
import json, sys
from run_benchmarks.cli.main import main

heavy, seen = sys.argv[1].split(","), {}
for argv in json.loads(sys.argv[2]):
    try:
        code = main(argv)
    except SystemExit as exc:  # --help
        code = exc.code
    seen[" ".join(argv)] = (code, sorted({m.split(".")[0] for m in sys.modules} & set(heavy)))
print(json.dumps(seen), file=sys.stderr)
"""


def run_python(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(cwd)}
    return subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_help_list_and_a_dry_run_import_no_framework_plotting_or_ssh_library(tmp_path):
    """``list`` reads its fields as plain YAML (catalog/listing.py): not even pydantic, which the dry run needs."""
    commands = [["--help"], ["list"], ["run", "gpt2_tiny:torch:cpu:1:1", "--dry-run", "--log-root", str(tmp_path)]]
    done = run_python(["-c", _COMMANDS, ",".join(HEAVY + ("pydantic",)), json.dumps(commands)], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stderr.splitlines()[-1])
    # after each command, in order: what it imported, with what came before
    assert seen == {"--help": [0, []], "list": [0, []], " ".join(commands[2]): [0, ["pydantic"]]}, seen


def test_help_imports_no_commands_module_nor_its_libraries(tmp_path):
    done = run_python(["-c", _COMMANDS, ",".join(HEAVY + COMMAND_LIBRARIES), json.dumps([["--help"]])], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stderr.splitlines()[-1]) == {"--help": [0, []]}
    assert "usage: accelbench" in done.stdout and "calibrate" in done.stdout


def test_every_command_names_a_function_that_exists():
    from run_benchmarks.cli.arguments import build_parser
    from run_benchmarks.cli.main import COMMANDS, command

    parsed = build_parser()._subparsers._group_actions[0].choices  # the COMMAND argument's choices
    assert set(COMMANDS) == set(parsed)
    assert all(callable(command(name)) for name in COMMANDS)


def test_the_console_script_exits_2_on_a_user_error_and_on_a_bad_argument(tmp_path):
    command = Path(sys.executable).parent / "accelbench"
    assert command.is_file(), f"{command}: ./dev setup installs it (setup.cfg console_scripts)"
    env = {**os.environ, "TMPDIR": str(tmp_path)}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(command), *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)

    refused = run("run", "gpt2_tiny:torch")  # a UserError: one message, no traceback
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith("accelbench: error: case name") and "Traceback" not in refused.stderr
    assert refused.stdout == ""
    unknown = run("frobnicate")  # argparse's own refusal
    assert unknown.returncode == 2 and "usage: accelbench" in unknown.stderr and "invalid choice" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    version = run("--version")
    assert version.returncode == 0 and version.stdout.startswith("accelbench ")


def test_start_task_exits_2_on_a_user_error(tmp_path):
    """The FlagPerf-compatible entry, ``python start_task.py``."""
    done = run_python([str(ROOT / "start_task.py"), "--case_name", "", "--log-root", str(tmp_path / "logs")],
                      tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("accelbench: error: ") and "no case named" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "logs").exists()
