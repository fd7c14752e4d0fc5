"""``accelbench certify`` and ``verify``: a run's signed certificate, and its check (results/certificate/).

Exit statuses of ``verify``: 0 verified (signature, validity and, with --bundle, every log and record), 1
refused (each thing that does not match is listed), 2 usage (a file that is no certificate, a key that is no
ed25519 key, a bundle that cannot be read)."""
from __future__ import annotations

import argparse
import json

from rich.console import Console

from run_benchmarks.cli.exit_codes import EXIT_FAILED, EXIT_OK
from run_benchmarks.cli.store_options import open_store
from run_benchmarks.errors import UserError
from run_benchmarks.pathnames import write_text_file
from run_benchmarks.results.certificate import check, signing
from run_benchmarks.results.certificate.document import build


def cmd_certify(args: argparse.Namespace, console: Console) -> int:
    key = signing.load_private_key(args.key)  # a bad key stops before the store is read
    with open_store(args) as store:
        document = build(store, args.run, args.valid_days, args.baseline, args.baseline_at_least)
    signed = signing.sign(document, key)
    text = json.dumps(signed, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    write_text_file(args.output, text)
    say = lambda line: console.print(line, markup=False, highlight=False, soft_wrap=True)  # noqa: E731
    say(f"wrote {args.output}: certificate of run {document['run']['run_id']}, signed by key id "
        f"{signed['signature']['key_id']}, valid until {document['valid_until']}")
    say(f"  {document['compliance']}")
    for pair in (document.get("baseline") or {}).get("pairs", []):
        say(f"  against baseline {document['baseline']['run_id']}: {pair['workload']}: {pair['verdict']}")
    say(f"  {len(document['files'])} file(s) and {len(document['records'])} record(s) bound by their SHA-256; "
        f"check with: accelbench verify {args.output} --key PUBLIC_KEY [--bundle BUNDLE]")
    return EXIT_OK


def cmd_verify(args: argparse.Namespace, console: Console) -> int:
    if args.bundle is not None and not args.bundle.is_file():
        raise UserError(f"--bundle {args.bundle}: no such file", "name the archive `accelbench bundle` wrote")
    document = check.read(args.file)
    key = signing.load_public_key(args.key) if args.key is not None else None
    verdict = check.verify(document, key, args.bundle)
    say = lambda line: console.print(line, markup=False, highlight=False, soft_wrap=True)  # noqa: E731
    say(f"{args.file}: run {(document.get('run') or {}).get('run_id')}: {str(document.get('compliance'))[:2000]}")
    for note in verdict.notes:
        say(f"  {note}")
    if verdict.verified:
        say("verified" + ("" if key is not None else " (signer not checked)"))
        return EXIT_OK
    say(f"REFUSED: {len(verdict.problems)} thing(s) do not match:")
    for problem in verdict.problems:
        say(f"  - {problem}")
    return EXIT_FAILED
