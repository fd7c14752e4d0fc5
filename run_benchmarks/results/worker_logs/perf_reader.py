"""Perf records out of a log file, fast and in bounded memory.

A rank's log is read in blocks of whole lines; the record lines of a block are
joined into one JSON array and decoded by a single ``orjson`` call, instead of
one decode (and one object) per line. That is what lets a gigabyte of step
records be read at over 100 MB/s (benchmarks/analyze_scale.py) while memory
stays at a block. A block that does not decode as a whole (a torn or foreign
line) is read again line by line, so each bad line is named and skipped.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import orjson

from training.contract import perflog

PREFIX = perflog.PREFIX.encode()
BLOCK_BYTES = 256 << 10  # small enough to stay in cache; a record line is ~200 bytes
_ALL_RECORDS_JOIN = b"\n" + PREFIX


def blocks(path: Path, block_bytes: int = BLOCK_BYTES) -> Iterator[tuple[int, bytes]]:
    """(number of the block's first line, whole lines) until the end of the file."""
    line = 1
    rest = b""
    with open(path, "rb") as f:
        while True:
            data = f.read(block_bytes)
            if not data:
                if rest:
                    yield line, rest
                return
            data = rest + data
            cut = data.rfind(b"\n") + 1
            if cut == 0:  # one line longer than a block: keep reading until it ends
                rest = data
                continue
            rest = data[cut:]
            yield line, data[:cut]
            line += data.count(b"\n", 0, cut)


def _payloads(block: bytes) -> bytes:
    """The block's records as one JSON array."""
    if block.startswith(PREFIX) and block.count(_ALL_RECORDS_JOIN) == block.count(b"\n") - 1:
        # Only records (the usual rank log): one substitution turns the lines into an array.
        return b"[" + block[len(PREFIX):].rstrip(b"\n").replace(_ALL_RECORDS_JOIN, b",") + b"]"
    parts = [line[line.find(PREFIX) + len(PREFIX):] for line in block.split(b"\n") if PREFIX in line]
    return b"[" + b",".join(parts) + b"]"


def read_batches(path: Path, problems: list[str], block_bytes: int = BLOCK_BYTES) -> Iterator[list]:
    """The perf records of ``path``, a block's worth at a time, each as its decoded JSON value (version
    not yet checked); a line that carries the prefix but does not decode is reported in ``problems`` as
    ``path:line: why`` and left out."""
    for first_line, block in blocks(path, block_bytes):
        if PREFIX not in block:
            continue
        try:
            yield orjson.loads(_payloads(block))
        except orjson.JSONDecodeError:
            yield list(_line_by_line(path, first_line, block, problems))


def _line_by_line(path: Path, first_line: int, block: bytes, problems: list[str]) -> Iterator[dict]:
    for number, line in enumerate(block.split(b"\n"), first_line):
        start = line.find(PREFIX)
        if start < 0:
            continue
        try:
            yield orjson.loads(line[start + len(PREFIX):])
        except orjson.JSONDecodeError as exc:
            problems.append(f"{path}:{number}: perf record is not valid JSON: {exc}")
