"""Policy, certificates and the fairness lint on real runs: the session's golden runs (tests/goldens.py), read
and never run again here. A plain run is recorded compliant and certified, then verified against its own
bundle; a run on a token file opt_tiny does not declare is recorded non-compliant; the micro-benchmarks state
their operands random with a seed. No run of its own: each test costs its CLI calls (about a second)."""
from __future__ import annotations

import json

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519


def test_a_plain_run_is_recorded_compliant_certified_and_verified_against_its_bundle(golden_default, accelbench,
                                                                                      tmp_path):
    (doc,) = golden_default.docs()
    assert doc["compliance"]["compliant"] is True and doc["compliance"]["policy"] == ["cases/policy.yaml"]
    assert "cases/gpt2_tiny/case.yaml" in doc["compliance"]["files"] and doc["device_definition"] is None  # a CPU
    db = str(golden_default.db)
    assert "policy: compliant (cases/policy.yaml)" in accelbench("show", "last", "--db", db).stdout
    key = ed25519.Ed25519PrivateKey.generate()
    private, public = tmp_path / "key.pem", tmp_path / "key.pub"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    cert, bundle = tmp_path / "run.cert.json", tmp_path / "run.tar.gz"
    made = accelbench("certify", "last", "--key", str(private), "-o", str(cert), "--db", db)
    assert made.returncode == 0, made.stderr
    certificate = json.loads(cert.read_text())
    assert certificate["compliance"].startswith("compliant")
    assert any(name.endswith("rank0.stdout.log") for name in certificate["files"])
    assert any(node.get("host") for node in certificate["environment"]["nodes"])
    assert accelbench("bundle", "last", "-o", str(bundle), "--db", db).returncode == 0
    verified = accelbench("verify", str(cert), "--key", str(public), "--bundle", str(bundle))
    assert verified.returncode == 0 and "hash as certified" in verified.stdout, verified.stdout


def test_a_run_on_data_the_case_does_not_declare_is_recorded_non_compliant(golden_local, accelbench):
    tokens = golden_local.doc("opt_tiny:torch:cpu:1:1", **{"data.source": "tokens"})
    verdict = tokens["compliance"]
    assert verdict["compliant"] is False and [d["key"] for d in verdict["departures"]] == ["data.path", "data.source"]
    lora = golden_local.doc("llama_tiny_lora:torch:cpu:1:1")
    assert lora["compliance"]["compliant"] is True
    report = accelbench("report", "last", "--db", str(golden_local.db)).stdout
    assert "NON-COMPLIANT" in report and "not comparable with the compliant rows'" in report


def test_micro_benchmarks_state_their_operands_random_with_a_seed(golden_micro):
    for doc in golden_micro.docs():
        sized = [f for f in doc["figures"] if "bytes" in (f["params"] or {}) or "m" in (f["params"] or {})]
        assert sized and all(f["params"]["inputs"] == "normal" and f["params"]["seed"] == 1234 for f in sized)
        assert not any("operands random" in w for w in doc["warnings"]), doc["warnings"]
