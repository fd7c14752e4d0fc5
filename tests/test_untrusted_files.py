"""What a command is handed or told to write is checked before the filesystem sees it: bundles from someone
else (their run id, members, sizes and rows), ``-o`` targets, ``--run-id``, names that become folders,
config files and sweep grids. Each refusal is exit 2 with the name, the reason and the fix, no traceback,
and nothing written outside the test's folders.

Bundles are built here as an attacker would: any manifest, any members, SHA256SUMS recomputed to match.
Everything runs the CLI in-process (``accelbench`` fixture): no launcher is reached.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import tarfile
import time
from pathlib import Path

import pytest

from run_benchmarks.results.bundle.archive import ATTEMPTS, CHECKSUMS, MANIFEST
from run_benchmarks.results.store.store import ResultStore

RUN = "20261125-120000-abcd"


def attempt(run_id: str = RUN, **extra) -> dict:
    return {"run_id": run_id, "case_name": "gpt2_tiny:torch:cpu:1:1", "case": "gpt2_tiny", "framework": "torch",
            "hardware": "cpu", "nnodes": 1, "nprocs_per_node": 1, "world_size": 1, "round": 1, "attempt": 1,
            "status": "ok",
            "source": "accelbench", **extra}


def make_bundle(path: Path, run_id: str = RUN, attempts: list | None = None, files: dict | None = None,
                extra: list[tarfile.TarInfo] = (), manifest: dict | None = None) -> Path:
    """A bundle as anyone can write one: every member listed in SHA256SUMS with its true digest."""
    attempts = [attempt(run_id)] if attempts is None else attempts
    files = {"run/gpt2_tiny-torch-cpu-1x1/round1/results.json": b"{}"} if files is None else files
    run = {"run_id": run_id, "started_at": "2026-11-25T12:00:00+00:00", "status": "done", "source": "accelbench",
           "log_dir": f"/elsewhere/logs/{run_id}"}
    doc = {"schema": "accelbench.bundle/1", "run_id": run_id, "created_at": "2026-11-25T12:10:00+00:00",
           "source": "accelbench", "attempts": len(attempts), "files": len(files), "run": run, **(manifest or {})}
    members = {MANIFEST: json.dumps(doc).encode(), ATTEMPTS: json.dumps(attempts).encode(),
               **{name: data for name, data in files.items()}}
    sums = "".join(f"{hashlib.sha256(data).hexdigest()}  {name}\n" for name, data in members.items())
    with tarfile.open(path, "w:gz") as tar:
        for name, data in [*members.items(), (CHECKSUMS, sums.encode())]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for info in extra:
            tar.addfile(info)
    return path


def tree(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def refused(result, *needles: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    assert result.stderr.startswith("accelbench: error: "), result.stderr
    for needle in needles:
        assert needle in result.stderr, (needle, result.stderr)
    assert "fix:" in result.stderr
    return result.stderr


@pytest.fixture
def place(tmp_path):
    """A folder holding the log root and the bundles; what lies outside it is watched too."""
    home = tmp_path / "home"
    (home / "logs").mkdir(parents=True)
    return home


def import_bundle(accelbench, place: Path, bundle: Path, env: dict | None = None):
    return accelbench("import", bundle, "--db", place / "logs" / "results.db", cwd=place, env=env)


# ---------------------------------------------------------------- the bundle's run id


@pytest.mark.parametrize("run_id", ["../../evil", "ABSOLUTE", "a/b", "..", ".hidden", "-rf",
                                    "x" * 300, "tab\there", "<script>"])
def test_a_bundle_whose_run_id_is_not_a_plain_name_is_refused_and_nothing_is_written(accelbench, place, tmp_path,
                                                                                      run_id):
    absolute = tmp_path / "abs-evil"
    run_id = str(absolute) if run_id == "ABSOLUTE" else run_id
    before = tree(tmp_path)
    bundle = make_bundle(tmp_path / "evil.tar.gz", run_id=run_id)
    err = refused(import_bundle(accelbench, place, bundle), "its run id")
    assert "nothing" in err or "cannot be a file name" in err or "a run id is" in err
    assert tree(tmp_path) - before <= {"evil.tar.gz", "home/logs/results.db"}
    assert not absolute.exists()
    with ResultStore(place / "logs" / "results.db") as store:
        assert store.runs() == []


def test_attempts_of_another_run_in_a_bundle_are_refused(accelbench, place, tmp_path):
    bundle = make_bundle(tmp_path / "b.tar.gz", attempts=[attempt(), attempt("20200101-000000-0000")])
    refused(import_bundle(accelbench, place, bundle), "an attempt of run '20200101-000000-0000'")
    assert tree(place / "logs") <= {"results.db"}


def test_the_manifests_run_row_cannot_name_another_run(accelbench, place, tmp_path):
    bundle = make_bundle(tmp_path / "b.tar.gz", manifest={"run": {"run_id": "other", "started_at": "x",
                                                                     "status": "done", "source": "accelbench"}})
    assert import_bundle(accelbench, place, bundle).returncode == 0
    with ResultStore(place / "logs" / "results.db") as store:
        assert [r["run_id"] for r in store.runs()] == [RUN]


@pytest.mark.parametrize("rows", ["[[[[", "[" * 100_000 + "]" * 100_000, '{"not": "a list"}', '[{"run_id": "%s", '
                                  '"round": "../x"}]' % RUN])
def test_malformed_attempts_are_refused_without_a_traceback(accelbench, place, tmp_path, rows):
    bundle = make_bundle(tmp_path / "b.tar.gz")
    with tarfile.open(bundle, "r:gz") as tar:  # swap the attempts for hostile text, checksums recomputed
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    members[ATTEMPTS] = rows.encode()
    members[CHECKSUMS] = "".join(f"{hashlib.sha256(d).hexdigest()}  {n}\n" for n, d in members.items()
                                 if n != CHECKSUMS).encode()
    with tarfile.open(bundle, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    refused(import_bundle(accelbench, place, bundle), ATTEMPTS if "round" not in rows else "round")
    assert tree(place / "logs") <= {"results.db"}


def test_a_stored_path_outside_the_imported_folder_is_dropped(accelbench, place, tmp_path):
    """A row pointing the store at /etc/hostname would be packed up by the next `accelbench bundle`."""
    bundle = make_bundle(tmp_path / "b.tar.gz", attempts=[attempt(results_path="/etc/hostname")])
    assert import_bundle(accelbench, place, bundle).returncode == 0
    with ResultStore(place / "logs" / "results.db") as store:
        (row,) = [a.row for a in store.attempts()]
    assert row["results_path"] is None


# ---------------------------------------------------------------- members and sizes


def _special(name: str, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    if kind == tarfile.SYMTYPE:
        info.linkname = "/etc/passwd"
    return info


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE, tarfile.BLKTYPE,
                                  tarfile.FIFOTYPE])
def test_links_devices_and_fifos_in_a_bundle_are_refused(accelbench, place, tmp_path, kind):
    bundle = make_bundle(tmp_path / "b.tar.gz", extra=[_special("run/x/odd", kind)])
    refused(import_bundle(accelbench, place, bundle), "link or device")
    assert tree(place / "logs") <= {"results.db"}


@pytest.mark.parametrize("name", ["run/../../escape.txt", "/abs/escape.txt", "run/bad\x07bell.log",
                                  "run/" + "y" * 300 + ".log"])
def test_member_names_that_cannot_be_files_here_are_refused(accelbench, place, tmp_path, name):
    bundle = make_bundle(tmp_path / "b.tar.gz", files={name: b"x"})
    refused(import_bundle(accelbench, place, bundle), "member")
    assert not (tmp_path / "escape.txt").exists() and not Path("/abs").exists()
    assert tree(place / "logs") <= {"results.db"}


def test_a_bundle_that_unpacks_past_the_cap_stops_while_unpacking(accelbench, place, tmp_path):
    """4 MiB of zeros compress to a few kB: the bytes are counted as they are written, the header not trusted."""
    bundle = make_bundle(tmp_path / "b.tar.gz", files={"run/big.log": bytes(4 << 20)})
    assert bundle.stat().st_size < 64 << 10
    err = refused(import_bundle(accelbench, place, bundle, env={"ACCELBENCH_MAX_BUNDLE_BYTES": str(1 << 20)}),
                  "unpacked size", "ACCELBENCH_MAX_BUNDLE_BYTES")
    assert "nothing was imported" in err
    assert tree(place / "logs") <= {"results.db"}, "the staging folder is removed"


def test_a_bundle_of_too_many_files_stops_at_the_cap(accelbench, place, tmp_path):
    files = {f"run/f{i}.log": b"" for i in range(30)}
    bundle = make_bundle(tmp_path / "b.tar.gz", files=files)
    refused(import_bundle(accelbench, place, bundle, env={"ACCELBENCH_MAX_BUNDLE_FILES": "20"}),
            "number of files", "ACCELBENCH_MAX_BUNDLE_FILES")
    assert tree(place / "logs") <= {"results.db"}


def test_an_oversized_manifest_is_refused_before_it_is_read(accelbench, place, tmp_path):
    bundle = make_bundle(tmp_path / "b.tar.gz", manifest={"note": "n" * 5000})
    refused(import_bundle(accelbench, place, bundle, env={"ACCELBENCH_MAX_BUNDLE_META_BYTES": "1000"}),
            MANIFEST, "ACCELBENCH_MAX_BUNDLE_META_BYTES")


# ---------------------------------------------------------------- -o targets


@pytest.fixture
def stored_run(accelbench, place, tmp_path):
    """A store holding one run (imported from a well-formed bundle), ready to be bundled again."""
    bundle = make_bundle(tmp_path / "good.tar.gz")
    assert import_bundle(accelbench, place, bundle).returncode == 0
    return place / "logs" / "results.db"


def _node(path: Path, kind: str) -> Path:
    if kind == "device":
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 7))  # /dev/full's numbers, made in the test's folder
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:
        (path.parent / "real.txt").write_text("keep me")
        path.symlink_to(path.parent / "real.txt")
    return path


@pytest.mark.parametrize("kind", ["device", "fifo", "folder", "link"])
def test_bundle_o_replaces_only_a_regular_file(accelbench, stored_run, tmp_path, kind):
    target = _node(tmp_path / f"target-{kind}", kind)
    mode = os.lstat(target).st_mode
    result = accelbench("bundle", RUN, "--db", stored_run, "-o", target)
    refused(result, str(target), "replaces only a regular file")
    assert os.lstat(target).st_mode == mode, "the node is left as it was"
    if kind == "link":
        assert (tmp_path / "real.txt").read_text() == "keep me"
    assert not [p for p in tmp_path.iterdir() if ".partial-" in p.name]


def test_bundle_o_over_a_regular_file_replaces_it_whole(accelbench, stored_run, tmp_path):
    target = tmp_path / "old.tar.gz"
    target.write_text("old")
    assert accelbench("bundle", RUN, "--db", stored_run, "-o", target).returncode == 0
    with tarfile.open(target, "r:gz") as tar:
        assert MANIFEST in tar.getnames()


@pytest.mark.parametrize("command", [("report", "--format", "markdown", "-o"), ("report", "-o"),
                                     ("compare", RUN, RUN, "--html")])
def test_report_outputs_replace_only_a_regular_file(accelbench, stored_run, tmp_path, command):
    target = _node(tmp_path / "dev", "device")
    refused(accelbench(*command, target, "--db", stored_run), "replaces only a regular file")
    assert stat.S_ISCHR(os.lstat(target).st_mode)


def test_a_stored_run_id_that_is_no_file_name_needs_o(accelbench, stored_run, tmp_path):
    """Stores written before run ids were checked may hold any text: bundling one names no file by itself."""
    import sqlite3

    with sqlite3.connect(stored_run) as conn:
        conn.execute("UPDATE runs SET run_id = '../up' WHERE run_id = ?", (RUN,))
        conn.execute("UPDATE attempts SET run_id = '../up' WHERE run_id = ?", (RUN,))
    refused(accelbench("bundle", "../up", "--db", stored_run, cwd=tmp_path), "run id", "-o FILE")
    assert not (tmp_path.parent / "up.accelbench.tar.gz").exists()


# ---------------------------------------------------------------- names given on the command line


@pytest.mark.parametrize("run_id", ["../../../elsewhere/x", "<script>", "a b", "x" * 200, "-x"])
def test_import_run_id_must_be_a_plain_name(accelbench, tmp_path, run_id):
    log = tmp_path / "train.log"
    log.write_text("step 1\n")
    refused(accelbench("import", log, "--format", "torchtitan", "--case-name", "gpt2_tiny:torch:cpu:1:1",
                       f"--run-id={run_id}", "--db", tmp_path / "r.db"), "--run-id")
    assert not (tmp_path / "r.db").exists() or not ResultStore(tmp_path / "r.db").runs()


@pytest.mark.parametrize("argv", [("run", "a" * 300 + ":torch:cpu:1:1", "--dry-run"),
                                  ("run", "gpt2_tiny:" + "t" * 5000 + ":cpu:1:1", "--dry-run"),
                                  ("vendor", "new", "v" * 300), ("vendor", "check", "../../etc")])
def test_names_longer_than_a_file_name_are_refused(accelbench, tmp_path, argv):
    refused(accelbench(*argv, log_root=tmp_path / "logs"))
    assert not (tmp_path / "logs").exists()


# ---------------------------------------------------------------- config files and grids


def test_a_config_file_over_the_cap_is_refused_before_parsing(accelbench, tmp_path):
    big = tmp_path / "cluster.yaml"
    big.write_text("hosts:\n" + "  - {name: n, backend: local}\n" * 400_000)  # 11 MB: 82 s and 1.8 GB before
    started = time.monotonic()
    refused(accelbench("run", "gpt2_tiny:torch:cpu:1:1", "--dry-run", "--cluster", big), str(big),
            "ACCELBENCH_MAX_CONFIG_BYTES")
    assert time.monotonic() - started < 5


def test_a_key_given_twice_is_refused_with_its_line(accelbench, tmp_path):
    conf = tmp_path / "cluster.yaml"
    conf.write_text("hosts:\n  - name: a\n    backend: local\n    name: b\n")
    refused(accelbench("run", "gpt2_tiny:torch:cpu:1:1", "--dry-run", "--cluster", conf),
            f"{conf}:4:5", "key 'name' is given twice (first on line 2)")


def test_a_sweep_over_the_point_cap_is_refused_before_it_is_expanded(accelbench, tmp_path):
    grid = ",".join(str(i) for i in range(1, 101))
    started = time.monotonic()
    refused(accelbench("sweep", "gpt2_tiny:torch:cpu:1:1", "--dry-run", "--grid", f"train.steps={grid}",
                       "--grid", f"train.warmup_steps={grid}", "--grid", f"train.seed={grid}",
                       "--log-root", tmp_path / "logs"),
            "1,000,000 points", "ACCELBENCH_MAX_SWEEP_POINTS")
    assert time.monotonic() - started < 5
