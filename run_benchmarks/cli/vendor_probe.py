"""``vendor check``'s run of a kind's own tools, where they are installed on this machine: each device-count
command and the command monitor run once, and the check shows what accelbench parsed from them (the count,
each device's readings), so a pattern that matches nothing or ``columns`` that do not fit the tool's fields
are found here, before a run misreads them. A tool not on PATH is skipped (it lives on the nodes).

The commands come from the checked vendor.yaml, which may be a contributed folder under review: they run only
with ``--run-tools`` (otherwise the check says which would run), each in its own session and with a job tag of its
own, so a timeout ends it and whatever it started, as accelbench ends any job (the reaper: hosts/reaper.py), and
only the first ``TOOL_OUTPUT_BYTES`` of its output are read."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from training.contract import readings
from training.contract.names import expand_placeholders

from run_benchmarks.backends.hosts import reaper
from run_benchmarks.backends.hosts.guard import ENV_TAG
from run_benchmarks.catalog.kinds import KindSpec
from run_benchmarks.limits import TOOL_OUTPUT_BYTES
from run_benchmarks.results.report.summary import human_bytes

TIMEOUT_S = 20.0
SHOWN = ("util_percent", "mem_used_bytes", "mem_total_bytes", "power_w", "temp_c")


def _run(argv: list[str], timeout_s: float = TIMEOUT_S) -> tuple[int, str, str]:
    """Exit code, stdout, stderr (each cut to the cap); on timeout the tool and every process it started are
    killed (the reaper's stop of its tag, no grace)."""
    cap = TOOL_OUTPUT_BYTES.value()
    tag = f"accelbench-tool-{uuid.uuid4().hex}"
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True,
                                    env={**os.environ, ENV_TAG: tag})
        except OSError as exc:
            return -1, "", str(exc)
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            reaper.stop_here(tag, 0.0)
            proc.wait()
            return -1, "", f"`{' '.join(argv)}` ran past {timeout_s:g} s and was killed with every process it started"
        texts = []
        for f in (out, err):
            f.seek(0)
            texts.append(f.read(cap).decode("utf-8", "replace"))
    return code, texts[0], texts[1]


def _installed(argv: list[str]) -> bool:
    return shutil.which(argv[0]) is not None


def _reading(device: dict) -> str:
    parts = [f"{key} {human_bytes(device[key]) if key.endswith('_bytes') else format(device[key], ',.4g')}"
             for key in SHOWN if isinstance(device.get(key), (int, float))]
    return f"device {device.get('index')}" + (f" ({device['name']})" if device.get("name") else "") + \
        (": " + ", ".join(parts) if parts else ": no reading")


def commands(where: str, kind: KindSpec, code_root: Path, vendor_dir: Path) -> list[str]:
    """What ``probe`` would run (installed here), named for the report when ``--run-tools`` is not given."""
    argvs = [(f"{where}.device_count[{i}]", expand_placeholders(c.command, sys.executable, str(code_root),
                                                                 str(vendor_dir)))
             for i, c in enumerate(kind.device_count)]
    if not isinstance(kind.monitor, str):
        argvs.append((f"{where}.monitor", expand_placeholders(kind.monitor.command, sys.executable, str(code_root),
                                                              str(vendor_dir))))
    return [f"{name} `{' '.join(argv)}`" for name, argv in argvs if _installed(argv)]


def probe(where: str, kind: KindSpec, code_root: Path, vendor_dir: Path) -> list[tuple[str, str, str]]:
    """(severity, what, fix) per command run: ``info`` says what was parsed, ``error`` why it cannot be."""
    out = []
    for i, counter in enumerate(kind.device_count):
        argv = expand_placeholders(counter.command, sys.executable, str(code_root), str(vendor_dir))
        if not _installed(argv):
            continue
        code, stdout, stderr = _run(argv)
        name = f"{where}.device_count[{i}] `{' '.join(argv)}`"
        if code:
            out.append(("warning", f"{name} exited with {code}: {stderr.strip()[-200:]}", "check the tool runs here"))
        elif counter.unmatched(stdout):
            out.append(("error", f"{where}.device_count[{i}]: {counter.unmatched(stdout)}",
                        "write a pattern that matches one line (or one group value) per device"))
        else:
            out.append(("info", f"{name} lists {counter.count(stdout)} device(s) here", ""))
    monitor = kind.monitor
    if isinstance(monitor, str):
        return out
    argv = expand_placeholders(monitor.command, sys.executable, str(code_root), str(vendor_dir))
    if not _installed(argv):
        return out
    code, stdout, stderr = _run(argv)
    name = f"{where}.monitor `{' '.join(argv)}`"
    if code:
        return out + [("warning", f"{name} exited with {code}: {stderr.strip()[-200:]}", "check the tool runs here")]
    try:
        sample = readings.parse(monitor, stdout)
    except readings.ReadingError as exc:
        return out + [("error", f"{name}: {exc}", "fix the monitor's columns or pattern to fit the tool's output")]
    out.append(("info", f"{name} parsed {len(sample['devices'])} device(s): "
                + "; ".join(_reading(d) for d in sample["devices"]), ""))
    if sample.get("refused"):
        out.append(("error", f"{name}: impossible readings (a run would leave them out and warn): "
                    + "; ".join(sample["refused"][:4]), "check that columns name each of the tool's fields in order"))
    return out
