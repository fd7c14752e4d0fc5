"""``accelbench verify``: a certificate received, checked, and a bundle against it.

Everything received is untrusted: the certificate is read whole only below its cap, parsed as JSON (no
code), and nothing of it is run or written; the bundle is read member by member without extracting, each
hashed as it streams, with the bundle caps on files and bytes. Every problem found is listed (a refusal says
what does not match), not only the first.
"""
from __future__ import annotations

import hashlib
import json
import tarfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from run_benchmarks import limits
from run_benchmarks.errors import UserError
from run_benchmarks.results.bundle.archive import ATTEMPTS, MANIFEST, RUN_PREFIX
from run_benchmarks.results.certificate import signing
from run_benchmarks.results.certificate.document import SCHEMA
from run_benchmarks.results.certificate.signing import sha256_of

CLOCK_SKEW_S = 300  # a certificate issued by a machine whose clock runs a little ahead is not "not yet valid"


@dataclass
class Verdict:
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        return not self.problems


def read(path: Path) -> dict:
    """The certificate's JSON document; a file that is none is a usage error (exit 2), not a refusal."""
    try:
        limits.CERTIFICATE_BYTES.check(path.stat().st_size, str(path))
        with open(path, "rb") as handle:
            data = handle.read(limits.CERTIFICATE_BYTES.value() + 1)
        document = json.loads(data)
    except OSError as exc:
        raise UserError(f"{path}: cannot be read: {exc.strerror or exc}", "name the file certify wrote") from None
    except (ValueError, RecursionError) as exc:
        raise UserError(f"{path}: not a JSON certificate ({str(exc)[:120]})", "name the file certify wrote") from None
    if not isinstance(document, dict):
        raise UserError(f"{path}: not a certificate (a JSON object)", "name the file certify wrote")
    return document


def _when(text, what: str, verdict: Verdict) -> Optional[datetime]:
    try:
        moment = datetime.fromisoformat(str(text))
    except ValueError:
        verdict.problems.append(f"{what} {str(text)[:40]!r} is not a time")
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _validity(document: dict, now: datetime, verdict: Verdict) -> None:
    issued = _when(document.get("issued_at"), "issued_at", verdict)
    until = _when(document.get("valid_until"), "valid_until", verdict)
    if until is not None and now > until:
        verdict.problems.append(f"expired: valid until {until.isoformat()}, {(now - until).days} day(s) ago")
    if issued is not None and (issued - now).total_seconds() > CLOCK_SKEW_S:
        verdict.problems.append(f"not valid yet: issued for {issued.isoformat()}, after now ({now.isoformat()})")
    if issued is not None and until is not None:
        verdict.notes.append(f"valid from {issued.isoformat()} until {until.isoformat()}")


def _bundle_members(bundle: Path, verdict: Verdict) -> tuple[dict[str, str], list, Optional[dict]]:
    """(file name under run/ -> SHA-256, the stored attempts, the manifest) streamed from the bundle."""
    files: dict[str, str] = {}
    attempts: list = []
    manifest = None
    count = total = 0
    cap = limits.BUNDLE_BYTES.value()
    try:
        with tarfile.open(bundle, "r:gz") as tar:
            for member in tar:
                if member.isdir():
                    continue
                count += 1
                limits.BUNDLE_FILES.check(count, str(bundle))
                if not member.isfile():
                    verdict.problems.append(f"bundle member {member.name[:120]!r} is a link or device, which a bundle "
                                            "never holds")
                    continue
                sha = hashlib.sha256()
                small = member.name in (ATTEMPTS, MANIFEST)
                if small:
                    limits.BUNDLE_META_BYTES.check(member.size, f"{bundle}: {member.name}")
                kept = bytearray()
                with tar.extractfile(member) as src:
                    while chunk := src.read(1 << 20):
                        total += len(chunk)
                        if total > cap:
                            raise limits.BUNDLE_BYTES.refusal(f"over {cap:,} bytes", str(bundle))
                        sha.update(chunk)
                        if small:
                            kept += chunk
                if member.name.startswith(RUN_PREFIX):
                    files[member.name[len(RUN_PREFIX):]] = sha.hexdigest()
                elif member.name == ATTEMPTS:
                    attempts = json.loads(bytes(kept))
                elif member.name == MANIFEST:
                    manifest = json.loads(bytes(kept))
    except (OSError, tarfile.TarError, EOFError) as exc:
        raise UserError(f"--bundle {bundle}: not a readable .tar.gz ({str(exc)[:120]})",
                        "name the archive `accelbench bundle` wrote") from None
    except (ValueError, RecursionError) as exc:
        verdict.problems.append(f"bundle {ATTEMPTS} or {MANIFEST} is not JSON ({str(exc)[:120]})")
    return files, attempts if isinstance(attempts, list) else [], manifest if isinstance(manifest, dict) else None


def _against_bundle(document: dict, bundle: Path, verdict: Verdict) -> None:
    files, attempts, manifest = _bundle_members(bundle, verdict)
    run_id = (document.get("run") or {}).get("run_id")
    if manifest is None or manifest.get("run_id") != run_id:
        verdict.problems.append(f"the bundle is not of run {run_id} (its manifest names "
                                f"{(manifest or {}).get('run_id')!r})")
    certified = document.get("files") or {}
    for name, entry in sorted(certified.items()):
        digest = entry.get("sha256") if isinstance(entry, dict) else None
        if name not in files:
            verdict.problems.append(f"{name}: certified, missing from the bundle")
        elif files[name] != digest:
            verdict.problems.append(f"{name}: changed (sha256 {files[name][:12]}... in the bundle, {str(digest)[:12]}... "
                                    "certified)")
    for name in sorted(set(files) - set(certified)):
        verdict.problems.append(f"{name}: in the bundle, not in the certificate")
    wanted = sorted(str(r.get("sha256")) for r in document.get("records") or [] if isinstance(r, dict))
    found = sorted(sha256_of(a.get("record")) for a in attempts if isinstance(a, dict))
    if wanted != found:
        changed = len(set(wanted) ^ set(found))
        verdict.problems.append(f"{ATTEMPTS}: the stored round records differ from the certified ones ({changed} "
                                f"record hash(es) unmatched of {len(wanted)} certified)")
    if verdict.verified:
        verdict.notes.append(f"bundle {bundle}: all {len(certified)} file(s) and {len(wanted)} record(s) hash as "
                             "certified")


def verify(document: dict, key: Optional[Ed25519PublicKey], bundle: Optional[Path] = None,
           now: Optional[datetime] = None) -> Verdict:
    verdict = Verdict()
    if document.get("schema") != SCHEMA:
        verdict.problems.append(f"schema {str(document.get('schema'))[:60]!r}: this accelbench reads {SCHEMA!r}")
    problems, notes = signing.check(document, key)
    verdict.problems += problems
    verdict.notes += notes
    _validity(document, now or datetime.now(timezone.utc), verdict)
    if bundle is not None:
        _against_bundle(document, bundle, verdict)
    return verdict
