"""Every size a user, a config file or a received file can make accelbench handle, bounded in one place.

Each cap has a default far above real use and far below what exhausts a machine, and an environment
variable that raises it; a refusal names the figure, the cap and that variable. The README's "What is
refused" lists them (``accelbench`` reads them when a command needs them, so a cap raised for one command
line applies to that command alone).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from run_benchmarks.errors import UserError


@dataclass(frozen=True)
class Cap:
    what: str     # what is bounded, e.g. "a config file's size"
    env: str      # the environment variable that raises it
    default: int
    unit: str     # "bytes", "points", ...
    why: str      # why the default is where it is

    def value(self) -> int:
        raw = os.environ.get(self.env, "").strip()
        if not raw:
            return self.default
        if not raw.isdigit() or int(raw) < 1:
            raise UserError(f"{self.env}={raw!r} is not a positive whole number", f"unset it, or give a number "
                            f"of {self.unit} (default {self.default:,})")
        return int(raw)

    def refusal(self, got: str, source: str) -> UserError:
        return UserError(f"{source}: {self.what} is {got}, over the cap of {self.value():,} {self.unit} "
                         f"({self.why})", f"if it is meant, raise the cap: {self.env}=<{self.unit}>")

    def check(self, got: int, source: str) -> int:
        """``got`` when within the cap; else the refusal, raised."""
        if got > self.value():
            raise self.refusal(f"{got:,} {self.unit}" if got < 10 ** 15 else f"over 10^15 {self.unit}", source)
        return got


CONFIG_BYTES = Cap("a config file's size", "ACCELBENCH_MAX_CONFIG_BYTES", 1 << 20, "bytes",
                   "configs are a few kB; PyYAML needs ~170x a file's size in memory")
SWEEP_POINTS = Cap("the sweep's number of points", "ACCELBENCH_MAX_SWEEP_POINTS", 10_000, "points",
                   "the same bound as a run's rounds: each point is at least one round with its own folder")
# From real bundles (tests/test_hostile_bundles.py prints the suite's): gpt2_tiny on 2 nodes, 2 rounds of 6 steps
# is 291 KB unpacked from 44 KB (6.6x); its rank logs take ~300 bytes per rank and step, a node's monitor ~1 KB a
# second. A 1,024-rank run of 1,000 steps is ~0.3 GB of rank logs: 1 GiB leaves room, and a bomb stops far sooner.
BUNDLE_BYTES = Cap("the bundle's unpacked size", "ACCELBENCH_MAX_BUNDLE_BYTES", 1 << 30, "bytes",
                   "a 1,024-rank run of 1,000 steps logs ~0.3 GB; held to from the headers before any data is "
                   "read, and counted again as it is unpacked")
BUNDLE_RATIO = Cap("the bundle's unpacked size over its packed size", "ACCELBENCH_MAX_BUNDLE_RATIO", 100, "times",
                   "gzip packs a real run's bundle about 7x; a bomb of zeros about 1,000x. Judged past 64 MiB "
                   "unpacked")
BUNDLE_FILES = Cap("the bundle's number of files", "ACCELBENCH_MAX_BUNDLE_FILES", 100_000, "files",
                   "a run folder holds a few files per rank and round")
BUNDLE_META_BYTES = Cap("a bundle's manifest, checksum or attempts file", "ACCELBENCH_MAX_BUNDLE_META_BYTES",
                        512 << 20, "bytes", "each is read into memory whole before anything is stored")
NODE_LOG_BYTES = Cap("a node's folder on the shared volume, copied into the run folder",
                     "ACCELBENCH_MAX_NODE_LOG_BYTES", 16 << 30, "bytes",
                     "far above a node's logs of one round: what a node's job wrote there is untrusted")
TOOL_OUTPUT_BYTES = Cap("a vendor tool's output read by `vendor check --run-tools`", "ACCELBENCH_MAX_TOOL_OUTPUT_BYTES",
                        1 << 20, "bytes", "an smi tool prints a few kB; only the first bytes are read")
CERTIFICATE_BYTES = Cap("a certificate's size", "ACCELBENCH_MAX_CERTIFICATE_BYTES", 64 << 20, "bytes",
                        "read whole before its signature is checked; a run's certificate is a few hundred kB")
