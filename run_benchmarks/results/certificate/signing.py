"""The signature of a certificate: ed25519 (through ``cryptography``) over its canonical JSON.

Canonical JSON: every field but ``signature``, keys sorted, no whitespace, UTF-8, no NaN or infinity (a
non-finite figure is written as a string before signing). The file itself is indented for reading, its
``compliance`` field first; whoever checks it rebuilds the canonical bytes from the parsed document, so the
layout of the file never matters, only its content. The signature names its public key (raw, base64) and a
key id (the first 16 hex digits of the key's SHA-256), so a certificate can be checked against the key it
names when no key is given, which proves it whole but not who signed it.

Keys are PEM files as ``openssl genpkey -algorithm ed25519 -out key.pem`` writes them (the public half:
``openssl pkey -in key.pem -pubout -out key.pub``); an encrypted private key is refused with that fix.
"""
from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any, Optional

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from run_benchmarks import limits
from run_benchmarks.errors import UserError

ALGORITHM = "ed25519"
SIGNATURE = "signature"
MAKE_KEY = "make one with: openssl genpkey -algorithm ed25519 -out key.pem (its public half: openssl pkey -in " \
           "key.pem -pubout -out key.pub)"


def canonical(document: dict) -> bytes:
    """The bytes that are signed: every field but the signature, keys sorted, no whitespace, UTF-8."""
    body = {k: v for k, v in document.items() if k != SIGNATURE}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def sha256_of(data: Any) -> str:
    """The SHA-256 of ``data`` as canonical JSON (a workload's settings, a stored record)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _read_key(path: Path, what: str) -> bytes:
    try:
        limits.CONFIG_BYTES.check(path.stat().st_size, f"{what} {path}")
        return path.read_bytes()
    except OSError as exc:
        raise UserError(f"{what} {path}: cannot be read: {exc.strerror or exc}", MAKE_KEY) from None


def load_private_key(path: Path) -> Ed25519PrivateKey:
    data = _read_key(path, "--key")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise UserError(f"--key {path}: the private key is encrypted",
                        "give an unencrypted copy: openssl pkey -in key.pem -out plain.pem") from None
    except ValueError as exc:
        raise UserError(f"--key {path}: not a PEM private key ({str(exc)[:120]})", MAKE_KEY) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise UserError(f"--key {path}: a {type(key).__name__.removeprefix('_')} key, not ed25519", MAKE_KEY)
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    """A PEM public key; a private key file is accepted too (its public half is used)."""
    data = _read_key(path, "--key")
    try:
        key = serialization.load_pem_public_key(data)
    except ValueError:
        try:
            private = serialization.load_pem_private_key(data, password=None)
        except (TypeError, ValueError) as exc:
            raise UserError(f"--key {path}: not a PEM public key ({str(exc)[:120]})", MAKE_KEY) from None
        key = private.public_key()
    if not isinstance(key, Ed25519PublicKey):
        raise UserError(f"--key {path}: a {type(key).__name__.removeprefix('_')} key, not ed25519", MAKE_KEY)
    return key


def raw(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(key: Ed25519PublicKey) -> str:
    return hashlib.sha256(raw(key)).hexdigest()[:16]


def sign(document: dict, key: Ed25519PrivateKey) -> dict:
    """``document`` with its ``signature`` field last."""
    public = key.public_key()
    value = key.sign(canonical(document))
    return {**{k: v for k, v in document.items() if k != SIGNATURE}, SIGNATURE: {
        "algorithm": ALGORITHM, "key_id": key_id(public), "public_key": base64.b64encode(raw(public)).decode(),
        "value": base64.b64encode(value).decode(),
        "signs": "the canonical JSON of every other field: keys sorted, no whitespace, UTF-8"}}


def check(document: dict, key: Optional[Ed25519PublicKey]) -> tuple[list[str], list[str]]:
    """(problems, notes): the signature against ``key``, or against the key the document names when ``key``
    is None (then a note says the signer was not checked)."""
    signature = document.get(SIGNATURE)
    if not isinstance(signature, dict) or signature.get("algorithm") != ALGORITHM:
        return [f"no {ALGORITHM} signature field: not a signed accelbench certificate"], []
    try:
        named = Ed25519PublicKey.from_public_bytes(base64.b64decode(str(signature.get("public_key")), validate=True))
        value = base64.b64decode(str(signature.get("value")), validate=True)
    except ValueError as exc:
        return [f"the signature field is malformed ({str(exc)[:120]})"], []
    notes = []
    if key is None:
        key = named
        notes.append(f"the signer was NOT checked: the signature was checked against the key the certificate "
                     f"names itself (key id {key_id(named)}); pass --key PUBLIC_KEY to check who signed it")
    elif raw(key) != raw(named):
        return [f"signed by another key: the certificate names key id {key_id(named)}, --key is {key_id(key)}"], []
    try:
        body = canonical(document)
    except ValueError as exc:
        return [f"the certificate holds a value canonical JSON cannot (NaN or infinity): {exc}"], notes
    try:
        key.verify(value, body)
    except InvalidSignature:
        return [f"the signature does not match the content (key id {key_id(key)}): the certificate was changed "
                "after it was signed"], notes
    return [], notes
