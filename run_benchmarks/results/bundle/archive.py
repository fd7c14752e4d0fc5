"""A run's results as one archive a vendor can hand to someone else, and the way back into another store.

``accelbench bundle RUN`` writes ``<run_id>.accelbench.tar.gz``:

- ``bundle.json``: what the archive is (BUNDLE_SCHEMA), the run's store row, and how many attempts;
- ``store/attempts.json``: the run's attempts exactly as the store holds them (figures, workload, record);
- ``environment.json``: each attempt's environment (hosts, image, probes, versions), for a quick look;
- ``run/...``: every file of the run folder: results.json and summary.json, every log, config.json and
  resolved.yaml of each round (an imported run: the logs it was imported from, under ``imported/``);
- ``SHA256SUMS``: the SHA-256 of every other file, in ``sha256sum -c`` form.

``accelbench import BUNDLE`` recognises a bundle by its ``bundle.json``, checks every checksum (and that no
file is missing or unlisted) before anything is stored, extracts the run folder under the target store's
log root and adds the run and its attempts as they were stored; a results.json without a stored row is
added the way ``store repair`` adds it (StoreRecovery.add_missing). Only the paths change: they point
at the new copy of the run folder.

Over 300 lines: writing and importing share the format and every check of untrusted input (names, paths,
sizes, checksums), kept in one file so the writer and the reader cannot drift apart.
"""
from __future__ import annotations

import hashlib
import io
import json
import secrets
import shutil
import tarfile
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from run_benchmarks import limits
from run_benchmarks.errors import UserError
from run_benchmarks.pathnames import component, component_problem, output_target
from run_benchmarks.pathnames import run_id as run_id_name
from run_benchmarks.results.store.faults import StoreError
from run_benchmarks.results.store.store import ResultStore
from run_benchmarks.results.store.schema import _insert_attempt
from run_benchmarks.results.bundle.received import RATIO_AFTER_BYTES, judged_end, refuse_impossible, scan_sizes
from run_benchmarks.results.store.recovery import results_documents
from run_benchmarks.results.store.versions import NewerRowError, StoredRowError, read_row

BUNDLE_SCHEMA = "accelbench.bundle/1"
MANIFEST, CHECKSUMS, ATTEMPTS, ENVIRONMENT = "bundle.json", "SHA256SUMS", "store/attempts.json", "environment.json"
RUN_PREFIX, IMPORTED = "run/", "imported"
CHUNK = 1 << 20


class BundleManifest(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schema_: str = Field(BUNDLE_SCHEMA, alias="schema")
    run_id: str
    created_at: str
    source: str = Field(description="the run's source: accelbench, or import:<parser>/<version>")
    attempts: int
    files: int = Field(description="files under run/, the run folder")
    run: dict[str, Any] = Field(description="the run's row of the store (log_dir: where it was)")


class _Hashing:
    """A file object that hashes what tarfile reads from it: the checksum is of exactly the archived bytes,
    even of a log that is still growing."""

    def __init__(self, raw: BinaryIO):
        self.raw, self.sha = raw, hashlib.sha256()

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        self.sha.update(data)
        return data


def is_bundle(path: Path) -> bool:
    """Whether ``path`` is a .tar.gz holding a bundle manifest (any other log goes to the importers). A
    member of more than 64 MiB before the manifest is not skipped (that is unpacking it): the file is taken
    as a bundle, for import_bundle's checks of its sizes to judge."""
    try:
        with tarfile.open(path, "r:gz") as tar:
            first, skipped = tar.next(), 0
            while first is not None and first.name != MANIFEST:
                skipped += max(first.size, 0)
                if skipped > RATIO_AFTER_BYTES:
                    return True
                first = tar.next()
            return first is not None
    except (OSError, tarfile.TarError, EOFError):
        return False


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes, sums: dict[str, str]) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), int(datetime.now().timestamp()), 0o644
    tar.addfile(info, io.BytesIO(data))
    sums[name] = hashlib.sha256(data).hexdigest()


def _add_file(tar: tarfile.TarFile, path: Path, name: str, sums: dict[str, str]) -> None:
    info = tar.gettarinfo(str(path), arcname=name)
    with open(path, "rb") as raw:
        reader = _Hashing(raw)
        tar.addfile(info, reader)
    sums[name] = reader.sha.hexdigest()


def _json(data: Any) -> bytes:
    return (json.dumps(data, indent=2, sort_keys=True, default=str) + "\n").encode()


def write_bundle(store: ResultStore, ref: str, output: Optional[Path] = None) -> tuple[Path, BundleManifest]:
    """The run ``ref`` (id, prefix, ``last``) of ``store`` as one .tar.gz; returns its path and manifest."""
    run_id = store.resolve_run(ref)
    run = store.run(run_id)
    if run["status"] == "running":
        raise UserError(f"run {run_id} is still running: its logs and rows are not final",
                        "wait for it to end (or, if its orchestrator died, run `accelbench store repair`), then "
                        "bundle it")
    attempts = [{k: v for k, v in a.row.items() if k != "id"} for a in store.attempts(run_ids=[run_id])]
    files: list[tuple[Path, str]] = []
    if run["source"] == "accelbench":
        folder = Path(run["log_dir"] or "")
        if not run.get("log_dir") or not folder.is_dir():
            raise UserError(f"run {run_id}: its folder {run.get('log_dir')} is gone, and a bundle needs its logs",
                            "bundle it on the machine that holds its log folder")
        files = [(p, RUN_PREFIX + p.relative_to(folder).as_posix()) for p in sorted(folder.rglob("*"))
                 if p.is_file() and not p.is_symlink()]
    else:  # an import: the logs it was read from
        for a in attempts:
            path = Path(a.get("results_path") or "")
            if a.get("results_path") and path.is_file():
                files.append((path, f"{RUN_PREFIX}{IMPORTED}/{a['round']}-{path.name}"))
    manifest = BundleManifest(run_id=run_id, created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                              source=run["source"], attempts=len(attempts), files=len(files), run=run)
    if output is None:
        component(run_id, "run id", "bundle it with -o FILE, a name of your choosing")
        output = Path(f"{run_id}.accelbench.tar.gz")
    output = output_target(Path(output))
    partial = output.with_name(f".{output.name}.partial-{secrets.token_hex(3)}")
    sums: dict[str, str] = {}
    try:
        with tarfile.open(partial, "w:gz") as tar:
            _add_bytes(tar, MANIFEST, _json(manifest.model_dump(mode="json", by_alias=True)), sums)
            _add_bytes(tar, ATTEMPTS, _json(attempts), sums)
            _add_bytes(tar, ENVIRONMENT, _json({f"{a['case_name']} round {a['round']} attempt {a['attempt']}":
                                                a.get("environment") for a in attempts}), sums)
            for path, name in files:
                _add_file(tar, path, name, sums)
            _add_bytes(tar, CHECKSUMS, "".join(f"{h}  {n}\n" for n, h in sums.items()).encode(), {})
        partial.replace(output)  # a reader never sees half an archive
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise UserError(f"cannot write the bundle {output}: {exc}", "free space there or give another -o FILE")
    return output, manifest


# ---------------------------------------------------------------- reading a bundle back


ASK_ORIGINAL = "ask whoever sent it for the bundle `accelbench bundle` wrote"


def _safe_name(name: str, bundle: Path) -> PurePosixPath:
    """A member's path inside the staging folder: relative, no '..', each part a plain file name (a log may
    start with '.'; nothing may hold a control character or be longer than a file name can be)."""
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise UserError(f"{bundle}: member {name!r} would be written outside its folder; nothing was imported",
                        ASK_ORIGINAL)
    for part in path.parts:
        problem = component_problem(part.lstrip(".") or "x")
        if problem:
            raise UserError(f"{bundle}: member {name[:80]!r} cannot be a file name here ({problem}); nothing was "
                            "imported", ASK_ORIGINAL)
    return path


def _read_small(tar: tarfile.TarFile, name: str, bundle: Path) -> bytes:
    """One of the bundle's own files, whole, after checking its size against the cap."""
    member = tar.getmember(name)
    limits.BUNDLE_META_BYTES.check(member.size, f"{bundle}: {name}")
    return tar.extractfile(member).read(limits.BUNDLE_META_BYTES.value() + 1)


def _read_sums(tar: tarfile.TarFile, bundle: Path) -> tuple[dict[str, str], BundleManifest]:
    try:
        sums_text = _read_small(tar, CHECKSUMS, bundle).decode()
        manifest = BundleManifest.model_validate_json(_read_small(tar, MANIFEST, bundle))
    except (KeyError, AttributeError, UnicodeDecodeError, ValidationError, RecursionError) as exc:
        raise UserError(f"{bundle}: not a complete accelbench bundle ({str(exc)[:300]})",
                        f"a bundle holds {MANIFEST} and {CHECKSUMS}; write one with `accelbench bundle RUN`")
    run_id_name(manifest.run_id, f"{bundle}: its run id", "a bundle names its run by the id `accelbench` gave it; "
              + ASK_ORIGINAL)
    if manifest.schema_ != BUNDLE_SCHEMA:
        raise UserError(f"{bundle}: bundle schema {manifest.schema_!r}, this accelbench reads {BUNDLE_SCHEMA!r}",
                        "import it with the accelbench version that wrote it")
    sums = {}
    for line in sums_text.splitlines():
        digest, _, name = line.partition("  ")
        sums[name] = digest
    return sums, manifest


def _extract_verified(tar: tarfile.TarFile, sums: dict[str, str], into: Path, bundle: Path) -> None:
    """Every member into ``into``, each hashed as it is written and compared with SHA256SUMS. The bytes and
    files are counted as they are written, against the caps (the headers were held to them before any data
    was read: received.scan_sizes)."""
    seen = set()
    files = written = 0
    max_bytes = limits.BUNDLE_BYTES.value()
    for member in tar:  # one header at a time: a bundle of millions of members stops at the cap
        if member.isdir():
            continue
        files += 1
        limits.BUNDLE_FILES.check(files, f"{bundle} (nothing was imported)")
        if not member.isfile():
            raise UserError(f"{bundle}: member {member.name!r} is a link or device, which a bundle never holds; "
                            "nothing was imported", "ask for the bundle as `accelbench bundle` wrote it")
        name = _safe_name(member.name, bundle)
        if member.name not in sums and member.name != CHECKSUMS:
            raise UserError(f"{bundle}: {member.name} is not in its {CHECKSUMS}; nothing was imported",
                            "the archive was changed after it was written: ask for the original bundle")
        target = into.joinpath(*name.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        sha = hashlib.sha256()
        with tar.extractfile(member) as src, open(target, "wb") as dst:
            while chunk := src.read(CHUNK):
                written += len(chunk)
                if written > max_bytes:
                    raise limits.BUNDLE_BYTES.refusal(f"over {max_bytes:,} bytes", f"{bundle} (nothing was "
                                                                                     "imported)")
                sha.update(chunk)
                dst.write(chunk)
        if member.name == CHECKSUMS:
            continue
        if sha.hexdigest() != sums[member.name]:
            raise UserError(f"{bundle}: {member.name} does not match its SHA-256 in {CHECKSUMS} "
                            f"({sha.hexdigest()[:12]}... != {sums[member.name][:12]}...); nothing was imported",
                            "the file was damaged in transfer: copy the bundle again")
        seen.add(member.name)
    missing = sorted(set(sums) - seen)
    if missing:
        raise UserError(f"{bundle}: {len(missing)} file(s) listed in {CHECKSUMS} are missing ({missing[0]}, ...); "
                        "nothing was imported", "the archive is incomplete: copy the bundle again")


def _moved(path: Optional[str], old_dir: Optional[str], new_dir: Path, imported: dict[str, Path]) -> Optional[str]:
    """A stored path in the run's old folder (or an imported log) as the same file in the new copy."""
    if not path:
        return path
    if path in imported:
        return str(imported[path])
    if old_dir:
        try:
            return str(new_dir / Path(path).relative_to(old_dir))
        except ValueError:
            pass
    return path


def _inside(path: Optional[str], folder: Path) -> Optional[str]:
    """A stored path only if it is in the imported run's folder: a received row must not point the store
    at another file of this machine (a later `accelbench bundle` of the run would pack it up)."""
    if not path:
        return path
    resolved = Path(path).resolve()
    return str(resolved) if resolved.is_relative_to(folder.resolve()) else None


def _read_attempts(path: Path, run_id: str, bundle: Path) -> list[dict]:
    """The bundle's attempts, each a row of the run the manifest names (one bundle, one run)."""
    try:
        attempts = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise UserError(f"{bundle}: {ATTEMPTS} is not readable JSON ({str(exc)[:200]}); nothing was imported",
                        ASK_ORIGINAL) from None
    if not isinstance(attempts, list) or not all(isinstance(a, dict) for a in attempts):
        raise UserError(f"{bundle}: {ATTEMPTS} is not a list of attempts; nothing was imported", ASK_ORIGINAL)
    for a in attempts:
        if a.get("run_id") != run_id:
            raise UserError(f"{bundle}: an attempt of run {str(a.get('run_id'))[:80]!r} in a bundle of run "
                            f"{run_id!r}; nothing was imported", ASK_ORIGINAL)
        if not isinstance(a.get("round"), int) or isinstance(a.get("round"), bool) or a["round"] < 1:
            raise UserError(f"{bundle}: an attempt with round {str(a.get('round'))[:40]!r}, not a whole number "
                            "from 1; nothing was imported", ASK_ORIGINAL)
        if a.get("results_path") is not None and not isinstance(a["results_path"], str):
            raise UserError(f"{bundle}: an attempt's results_path is not text; nothing was imported", ASK_ORIGINAL)
    try:  # as the row version that wrote each (a bundle from an older accelbench), migrated to today's
        return [read_row(a, f"{bundle}: {ATTEMPTS}").row for a in attempts]
    except StoredRowError as exc:
        raise UserError(f"{exc.message}; nothing was imported",
                        exc.fix if isinstance(exc, NewerRowError) else ASK_ORIGINAL) from None


def import_bundle(bundle: Path, store: ResultStore, log_root: Path) -> str:
    """Verify ``bundle``, extract its run folder to ``log_root/<run_id>`` and add its run and attempts to
    ``store``. Nothing is stored or left behind unless every checksum holds."""
    try:
        tar = tarfile.open(bundle, "r:gz")
    except (OSError, tarfile.TarError) as exc:
        raise UserError(f"{bundle}: cannot be read as a .tar.gz: {exc}", "copy the bundle again")
    log_root = Path(log_root).resolve()
    with tar:
        scan_sizes(tar, bundle, Path(bundle).stat().st_size)  # every header, held to the caps, before any data
        sums, manifest = _read_sums(tar, bundle)
        run_id = manifest.run_id
        if store.has_run(run_id):
            raise _held(store, run_id)
        target = log_root / run_id
        if target.exists():
            raise UserError(f"{target} exists already; nothing was imported",
                            "move that folder away, or import into a store under another --log-root")
        staging = log_root / f".{run_id}.bundle-{secrets.token_hex(3)}"
        try:
            _extract_verified(tar, sums, staging, bundle)
            attempts = _read_attempts(staging / ATTEMPTS, run_id, bundle)
            refuse_impossible(attempts, bundle, ASK_ORIGINAL)
            run_folder = staging / RUN_PREFIX.rstrip("/")
            run_folder.mkdir(exist_ok=True)
            for meta in (MANIFEST, CHECKSUMS, ENVIRONMENT, ATTEMPTS):  # kept beside the logs, as handed over
                if (staging / meta).is_file():
                    kept = "bundle-" + Path(meta).name
                    (staging / meta).replace(run_folder / kept.replace("bundle-bundle", "bundle"))
            run_folder.replace(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    old_dir = manifest.run.get("log_dir")
    imported = {a["results_path"]: target / IMPORTED / f"{a['round']}-{Path(a['results_path']).name}"
                for a in attempts if manifest.source != "accelbench" and a.get("results_path")}
    run_row = {**manifest.run, "run_id": run_id, "log_dir": str(target / IMPORTED if imported else target)}
    judged = judged_end(target, run_id, manifest.source, manifest.run.get("status"))
    run_row["note"] = "; ".join(filter(None, [run_row.get("note"), f"imported from bundle {Path(bundle).name} "
                                              f"at {datetime.now(timezone.utc).isoformat(timespec='seconds')}",
                                              judged]))
    if judged:
        run_row["status"] = "aborted"
    run_cols, attempt_cols = store.columns("runs"), store.columns("attempts")

    def work(cur) -> int:
        if store.has_run(run_id):  # imported meanwhile by another writer (one at a time holds the write lock)
            raise _held(store, run_id)
        run = {k: (json.dumps(v) if isinstance(v, (list, dict)) else v) for k, v in run_row.items() if k in run_cols}
        cur.execute(f"INSERT INTO runs ({', '.join(run)}) VALUES ({', '.join('?' for _ in run)})", list(run.values()))
        for row in attempts:
            row = {k: v for k, v in row.items() if k in attempt_cols and k != "id"}
            row["results_path"] = _inside(_moved(row.get("results_path"), old_dir, target, imported), target)
            if isinstance(row.get("record"), dict):
                row["record"] = {**row["record"], "results_path": row["results_path"]}
            cur.execute(*_insert_attempt(row))
        return store.add_missing(cur, run_id, results_documents(target) if not imported else [],
                            f"in bundle {Path(bundle).name} without a stored row")

    try:
        extra = store._write(work, store.retry_s, "ACCELBENCH_STORE_RETRY_S", f"the attempts of run {run_id}")
    except (StoreError, TypeError, ValueError, OverflowError) as exc:  # a received row with values no column takes
        shutil.rmtree(target, ignore_errors=True)
        raise UserError(f"{bundle}: its rows do not fit a results store ({str(exc)[:200]}); nothing was imported",
                        ASK_ORIGINAL) from None
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)  # no folder without its rows: the import can be run again
        raise
    return (f"run {run_id}: {len(attempts)} attempt(s) and {manifest.files} file(s) imported into {store.where}, "
            f"logs in {target}" + (f"; {extra} more from results.json files without a stored row" if extra else ""))


def _held(store: ResultStore, run_id: str) -> UserError:
    return UserError(f"{store.where} already holds run {run_id}; nothing was imported",
                     "import the bundle into another store (--db), or use this run as it is")
