"""``accelbench certify`` and ``verify`` (results/certificate/): a signed certificate of a run built from store rows
and a run folder this test writes, checked against the public key and against the run's bundle; a changed
figure, a changed log and an expired certificate are refused (exit 1), bad input is a usage error (exit 2).
All in this process; keys from ``openssl genpkey`` where openssl is installed, else the same PEM from
``cryptography``."""
from __future__ import annotations

import io
import json
import shutil
import subprocess
import tarfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from run_benchmarks.results.certificate import signing
from run_benchmarks.results.certificate.document import build
from run_benchmarks.results.store.schema import row_from_document
from run_benchmarks.results.store.store import ResultStore

from .test_policy_views import judged

LOG = "gpt2_tiny-torch-cpu-1x2/round1/localhost_noderank0/rank0.stdout.log"


def keys(folder: Path) -> tuple[Path, Path]:
    """(private, public) PEM files, as openssl makes them."""
    private, public = folder / "key.pem", folder / "key.pub"
    if shutil.which("openssl"):
        subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(private)], check=True)
        subprocess.run(["openssl", "pkey", "-in", str(private), "-pubout", "-out", str(public)], check=True)
    else:
        key = ed25519.Ed25519PrivateKey.generate()
        private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption()))
        public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                         serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public


def a_run(tmp_path: Path, run_id: str, sets: tuple[str, ...] = (), step_time: float = 0.5) -> Path:
    """A finished run in the store, with its folder: results.json and a rank log. Returns the store."""
    db, folder = tmp_path / "results.db", tmp_path / "logs" / run_id
    round_dir = folder / "gpt2_tiny-torch-cpu-1x2/round1"
    (round_dir / "localhost_noderank0").mkdir(parents=True)
    doc = {**judged(run_id, sets, step_time), "results_path": str(round_dir / "results.json")}
    (round_dir / "results.json").write_text(json.dumps(doc))
    (folder / LOG).write_text("step 0 loss 6.9\nstep 1 loss 6.8\n")
    with ResultStore(db) as store:
        store.begin_run(run_id, "2026-11-23T10:00:00+00:00", ["accelbench", "run"], "abc123", str(folder))
        store.add_attempt(row_from_document(doc))
        store.end_run(run_id, "2026-11-23T10:05:00+00:00")
    return db


def test_certify_then_verify_with_the_public_key_and_without_one(accelbench, tmp_path):
    private, public = keys(tmp_path)
    db = a_run(tmp_path, "run-ok")
    cert = tmp_path / "run.cert.json"
    made = accelbench("certify", "run-ok", "--key", str(private), "-o", str(cert), "--db", str(db))
    assert made.returncode == 0, made.stderr
    document = json.loads(cert.read_text())
    assert next(iter(document)) == "compliance" and document["compliance"].startswith("compliant")
    assert document["files"][LOG]["bytes"] == 32 and len(document["records"]) == 1
    (workload,) = document["workloads"]
    assert workload["figures"]["tokens_per_s_per_device"]["mean"] == 8192
    assert workload["compliance"]["files"]["cases/gpt2_tiny/case.yaml"]  # what the verdict was judged from
    assert workload["settings_sha256"] == signing.sha256_of(workload["settings"])
    ok = accelbench("verify", str(cert), "--key", str(public))
    assert ok.returncode == 0 and ok.stdout.rstrip().endswith("verified"), ok.stdout
    unsigned = accelbench("verify", str(cert))
    assert unsigned.returncode == 0 and "the signer was NOT checked" in unsigned.stdout
    cert.write_text(json.dumps(document, sort_keys=True))  # another layout of the same content: the same bytes signed
    assert accelbench("verify", str(cert), "--key", str(public)).returncode == 0


def test_one_byte_of_a_figure_changed_is_refused(accelbench, tmp_path):
    private, public = keys(tmp_path)
    db, cert = a_run(tmp_path, "run-ok"), tmp_path / "run.cert.json"
    accelbench("certify", "run-ok", "--key", str(private), "-o", str(cert), "--db", str(db))
    text = cert.read_text()
    assert text.count('"mean": 8192.0') == 1
    cert.write_text(text.replace('"mean": 8192.0', '"mean": 8193.0'))
    refused = accelbench("verify", str(cert), "--key", str(public))
    assert refused.returncode == 1 and "REFUSED" in refused.stdout
    assert "the signature does not match the content" in refused.stdout


def test_a_log_changed_in_the_bundle_is_refused_naming_it(accelbench, tmp_path):
    private, public = keys(tmp_path)
    db, cert, bundle = a_run(tmp_path, "run-ok"), tmp_path / "run.cert.json", tmp_path / "run.tar.gz"
    accelbench("certify", "run-ok", "--key", str(private), "-o", str(cert), "--db", str(db))
    assert accelbench("bundle", "run-ok", "-o", str(bundle), "--db", str(db)).returncode == 0
    ok = accelbench("verify", str(cert), "--key", str(public), "--bundle", str(bundle))
    assert ok.returncode == 0 and "all 2 file(s) and 1 record(s) hash as certified" in ok.stdout, ok.stdout
    changed = tmp_path / "changed.tar.gz"  # one log line altered, the rest as it was
    with tarfile.open(bundle, "r:gz") as src, tarfile.open(changed, "w:gz") as dst:
        for member in src:
            data = src.extractfile(member).read()
            if member.name == "run/" + LOG:
                data = data.replace(b"6.8", b"5.8")
            member.size = len(data)
            dst.addfile(member, io.BytesIO(data))
    refused = accelbench("verify", str(cert), "--key", str(public), "--bundle", str(changed))
    assert refused.returncode == 1 and f"{LOG}: changed" in refused.stdout, refused.stdout


def test_an_expired_certificate_is_refused_and_says_so(accelbench, tmp_path):
    private, public = keys(tmp_path)
    db, cert = a_run(tmp_path, "run-ok"), tmp_path / "old.cert.json"
    with ResultStore(db, reader=True) as store:
        document = build(store, "run-ok", 365, now=datetime.now(timezone.utc) - timedelta(days=400))
    cert.write_text(json.dumps(signing.sign(document, signing.load_private_key(private))))
    refused = accelbench("verify", str(cert), "--key", str(public))
    assert refused.returncode == 1 and "expired: valid until" in refused.stdout and "35 day(s) ago" in refused.stdout


def test_a_non_compliant_run_is_certified_saying_so_first_with_its_baseline(accelbench, tmp_path):
    private, public = keys(tmp_path)
    a_run(tmp_path, "run-ok")
    db, cert = a_run(tmp_path, "run-deep", ("model.n_layer=3",), 0.4), tmp_path / "deep.cert.json"
    made = accelbench("certify", "run-deep", "--key", str(private), "-o", str(cert), "--db", str(db),
                      "--baseline", "run-ok")
    assert made.returncode == 0, made.stderr
    document = json.loads(cert.read_text())
    first = next(iter(document.items()))
    assert first == ("compliance", "NON-COMPLIANT: departs from its case's policy: gpt2_tiny:torch:cpu:1:2 -: "
                                   "model.n_layer")
    (pair,) = document["baseline"]["pairs"]
    assert pair["verdict"] == "pass: 125.0% of the baseline's" and pair["departs"] == "B non-compliant"
    assert accelbench("verify", str(cert), "--key", str(public)).returncode == 0


def test_another_key_and_bad_input(accelbench, tmp_path):
    private, _ = keys(tmp_path)
    db, cert = a_run(tmp_path, "run-ok"), tmp_path / "run.cert.json"
    accelbench("certify", "run-ok", "--key", str(private), "-o", str(cert), "--db", str(db))
    other = tmp_path / "other.pub"
    other.write_bytes(ed25519.Ed25519PrivateKey.generate().public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    refused = accelbench("verify", str(cert), "--key", str(other))
    assert refused.returncode == 1 and "signed by another key" in refused.stdout
    rsa_key = tmp_path / "rsa.pem"
    rsa_key.write_bytes(rsa.generate_private_key(65537, 2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    wrong = accelbench("certify", "run-ok", "--key", str(rsa_key), "-o", str(cert), "--db", str(db))
    assert wrong.returncode == 2 and "not ed25519" in wrong.stderr and "openssl genpkey" in wrong.stderr
    junk = tmp_path / "junk.json"
    junk.write_text("not json")
    assert accelbench("verify", str(junk)).returncode == 2
    missing = accelbench("verify", str(cert), "--bundle", str(tmp_path / "nope.tar.gz"))
    assert missing.returncode == 2 and "no such file" in missing.stderr
    assert "Traceback" not in wrong.stderr + missing.stderr
