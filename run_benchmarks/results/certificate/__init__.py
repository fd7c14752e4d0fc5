"""Certificates: a run's figures, compliance verdict, workload, environment and the hash of every log and
record, signed with ed25519 (``accelbench certify``), and their check (``accelbench verify``).

``document`` builds what is signed from the store and the run folder; ``signing`` holds the canonical JSON,
the keys and the signature; ``check`` verifies a certificate received, and a bundle against it.

At the top of results/ beside checks/ and history/: it reads the store, report's summaries and a bundle's layout
(bundle/); nothing imports it but the CLI.
"""
