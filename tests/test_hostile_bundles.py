"""Received bundles that lie (issue 43): each is a real run's bundle (tests/goldens.py, golden_bundle) with one
thing changed and SHA256SUMS recomputed, as any sender can. A breakdown of the wrong shape and impossible
figures are refused on import (exit 2, nothing stored, no folder left); a run whose summary.json is empty is
judged aborted, as its own store judges it; a bundle bomb stops within seconds, having written little. A
store edited by hand to hold a wrong shape is refused by report and compare, never a traceback.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import os
import sqlite3
import tarfile
import time
from pathlib import Path
from typing import Callable

import pytest

from run_benchmarks.results.bundle.archive import ATTEMPTS, CHECKSUMS
from run_benchmarks.results.store.schema import ROW_VERSION
from run_benchmarks.results.store.store import ResultStore

from .hostile import Outside, refused
from .test_untrusted_files import import_bundle, place  # noqa: F401 - place: the fixture

BREAKDOWNS = {  # what a sender put as metrics.time_breakdown, and the key the refusal names
    "a-string": ("lots", "time_breakdown"),
    "a-list": ([1, 2], "time_breakdown"),
    "no-measured": ({"expected": {"compute_s": 0.01}}, "time_breakdown.measured"),
    "measured-null": ({"measured": None, "expected": {}}, "time_breakdown.measured"),
    "a-figure-as-text": ({"measured": {"compute_s": "fast", "communication_s": 0, "other_s": 0,
                                       "serialised_step_s": 1, "breakdown_steps": 2, "gradient_bytes": 3},
                          "expected": {}}, "time_breakdown.measured.compute_s"),
}
IMPOSSIBLE = {  # a figure no run measures, and what the refusal says of it
    "negative-throughput": ({"tokens_per_s_per_device": -18723.0}, "tokens/s/device -18,723 is negative"),
    "mfu-2.3e12": ({"mfu": 2.3e12}, "MFU 2.3e+14 % is over 100 %"),
    "nan": ({"tokens_per_s_total": math.nan}, "tokens/s total is nan (not a number)"),
    "infinity": ({"samples_per_s": math.inf}, "samples/s is infinite"),
}


def members(bundle: Path) -> dict[str, bytes]:
    with tarfile.open(bundle, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def write_bundle(path: Path, files: dict[str, bytes]) -> Path:
    """``files`` as a bundle, SHA256SUMS recomputed over them."""
    files = {name: data for name, data in files.items() if name != CHECKSUMS}
    files[CHECKSUMS] = "".join(f"{hashlib.sha256(d).hexdigest()}  {n}\n" for n, d in files.items()).encode()
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def with_attempts(bundle: Path, out: Path, change: Callable[[dict], None]) -> Path:
    """The bundle with ``change`` applied to each attempt's metrics column and its record's metrics alike."""
    files = members(bundle)
    attempts = json.loads(files[ATTEMPTS])
    for a in attempts:
        change(a["metrics"])
        change(a["record"]["metrics"])
    files[ATTEMPTS] = json.dumps(attempts).encode()  # NaN and Infinity as Python's json writes them
    return write_bundle(out, files)


def nothing_imported(place: Path) -> None:
    assert sorted(p.name for p in (place / "logs").iterdir()) == ["results.db"], "a folder was left"
    with ResultStore(place / "logs" / "results.db") as store:
        assert store.runs() == [] and store.attempts() == []


@pytest.mark.parametrize("name", list(BREAKDOWNS))
def test_a_breakdown_of_the_wrong_shape_is_refused_on_import(golden_bundle, accelbench, place, tmp_path, name):
    outside = Outside(tmp_path)
    shape, key = BREAKDOWNS[name]
    bundle = with_attempts(golden_bundle[2], tmp_path / f"{name}.tar.gz",
                           lambda m: m.__setitem__("time_breakdown", shape))
    err = refused(import_bundle(accelbench, place, bundle), f"{bundle}: {ATTEMPTS}", "metrics:", key,
                  "nothing was imported")
    assert f"row version {ROW_VERSION}" in err  # the received row's own version's rules
    nothing_imported(place)
    outside.unchanged()


@pytest.mark.parametrize("view", [("report", "{a}", "--format", "html", "-o", "{out}"),
                                  ("compare", "{a}", "{b}", "--html", "{out}"), ("show", "{a}")],
                         ids=["report-html", "compare-html", "show"])
def test_no_view_trusts_the_shape_of_a_store_edited_by_hand(golden_bundle, accelbench, place, tmp_path, view):
    """The real run imported, a second run beside it, then both rows' breakdowns made a string in SQLite."""
    log_root, run_id, bundle = golden_bundle
    db = place / "logs" / "results.db"
    assert import_bundle(accelbench, place, bundle).returncode == 0
    with sqlite3.connect(db) as conn:
        for table, skip in (("runs", ()), ("attempts", ("id",))):  # a copy of the run, as run "second"
            columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})") if r[1] not in skip]
            picked = ", ".join("'second'" if c == "run_id" else f'"{c}"' for c in columns)
            quoted = ", ".join(f'"{c}"' for c in columns)
            conn.execute(f"INSERT INTO {table} ({quoted}) SELECT {picked} FROM {table}")
        for rid, metrics in conn.execute("SELECT id, metrics FROM attempts").fetchall():
            changed = {**json.loads(metrics), "time_breakdown": "lots"}
            conn.execute("UPDATE attempts SET metrics = ? WHERE id = ?", (json.dumps(changed), rid))
    out = tmp_path / "view.html"
    argv = [w.format(a=run_id, b="second", out=out) for w in view]
    refused(accelbench(*argv, "--db", str(db)), "metrics: time_breakdown", "accelbench store repair")
    assert not out.exists()


@pytest.mark.parametrize("name", list(IMPOSSIBLE))
def test_impossible_figures_in_a_bundle_are_refused_as_a_log_import_refuses_them(golden_bundle, accelbench, place,
                                                                                  tmp_path, name):
    outside = Outside(tmp_path)
    figures, says = IMPOSSIBLE[name]
    bundle = with_attempts(golden_bundle[2], tmp_path / f"{name}.tar.gz", lambda m: m.update(figures))
    refused(import_bundle(accelbench, place, bundle), "round 1 is stored ok with impossible figure(s)", says,
            "nothing was imported")
    nothing_imported(place)
    outside.unchanged()


def test_a_bundle_whose_summary_json_is_empty_is_imported_as_aborted(golden_bundle, accelbench, place, tmp_path):
    """Locally such a run is marked aborted (store/recovery.py summary_state): the bundle gets the same judgement."""
    outside = Outside(tmp_path)
    log_root, run_id, bundle = golden_bundle
    files = members(bundle)
    (summary,) = [n for n in files if n.endswith("/summary.json") and n.count("/") == 1]
    files[summary] = b""
    done = import_bundle(accelbench, place, write_bundle(tmp_path / "empty-summary.tar.gz", files))
    assert done.returncode == 0, done.stderr
    with ResultStore(place / "logs" / "results.db") as store:
        run = store.run(run_id)
        assert len(store.attempts()) == 2
    assert run["status"] == "aborted"
    assert "judged aborted on import: its summary.json is empty (0 bytes)" in run["note"]
    assert "the bundle's row said 'done'" in run["note"]
    outside.unchanged()


def _bomb_member(name: str, gib: int = 2) -> tuple[bytes, str]:
    """A tar stream of one member of ``gib`` GiB of zeros, gzip-packed to ~2 MB (one small gzip member repeated:
    a gzip file may be many members, and tar reads them as one stream), and the member's SHA-256."""
    size = gib << 30
    info = tarfile.TarInfo(name)
    info.size = size
    header = info.tobuf(format=tarfile.GNU_FORMAT)
    zeros = gzip.compress(bytes(1 << 20), compresslevel=9)
    if gib not in ZEROS_SHA256:
        sha = hashlib.sha256()
        block = bytes(1 << 20)
        for _ in range(size >> 20):
            sha.update(block)
        ZEROS_SHA256[gib] = sha.hexdigest()
    return gzip.compress(header) + zeros * (size >> 20), ZEROS_SHA256[gib]


# SHA-256 of N GiB of zeros (`head -c 2147483648 /dev/zero | sha256sum`): hashing 2 GiB costs seconds of CPU
ZEROS_SHA256 = {2: "a7c744c13cc101ed66c29f672f92455547889cc586ce6d44fe76ae824958ea51"}


def test_a_bundle_bomb_stops_within_seconds_having_written_little(golden_bundle, accelbench, place, tmp_path):
    """A real bundle with a 2 GiB member of zeros packed into ~2 MB: refused by the unpacked/packed ratio (the
    default cap, ACCELBENCH_MAX_BUNDLE_RATIO) once 64 MiB are out, not after writing 2 GiB."""
    outside = Outside(tmp_path)
    files = members(golden_bundle[2])
    bomb_name = "run/bomb.log"
    bomb, digest = _bomb_member(bomb_name)
    files[CHECKSUMS] = (files[CHECKSUMS].decode() + f"{digest}  {bomb_name}\n").encode()
    rest = io.BytesIO()
    with tarfile.open(fileobj=rest, mode="w", format=tarfile.GNU_FORMAT) as tar:  # the real members after it
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    bundle = tmp_path / "bomb.tar.gz"
    bundle.write_bytes(bomb + gzip.compress(rest.getvalue()))
    assert bundle.stat().st_size < 4 << 20
    before, began = _written(), time.monotonic()
    err = refused(import_bundle(accelbench, place, bundle), "the bundle's unpacked size over its packed size",
                  "ACCELBENCH_MAX_BUNDLE_RATIO", "nothing was imported")
    assert "over the cap of 100 times" in err
    assert time.monotonic() - began < 20 and _written() - before < 128 << 20
    nothing_imported(place)
    outside.unchanged()


def _written() -> int:
    """Bytes this process has handed to write() so far (/proc/self/io wchar)."""
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("wchar:")).split()[1])


def test_the_real_bundle_is_well_within_the_default_caps(golden_bundle):
    """What the defaults are set from (README, "Caps"): the real run's bundle, packed and unpacked."""
    from run_benchmarks import limits

    packed = golden_bundle[2].stat().st_size
    unpacked = sum(len(d) for d in members(golden_bundle[2]).values())
    assert unpacked * 100 < limits.BUNDLE_BYTES.default and unpacked / packed < limits.BUNDLE_RATIO.default / 4
    print(f"real bundle: {packed:,} bytes packed, {unpacked:,} unpacked ({unpacked / packed:.1f}x)")
    assert os.path.getsize(golden_bundle[2]) == packed
