"""What changed at a change point, from the environment the runs on either side stored.

Each point's environment is read flat (``snapshot``): the accelbench commit (dirty or not), the vendor file's and
the extern config's sha256, the hosts, each node's image and image digest, every probe (driver, firmware,
kernel, clocks: whatever the kind and vendor probe), every version the workers reported (torch, paddle, CUDA,
Python, the OS and kernel) and the workload's ``debug.*`` settings. A value that differs between nodes is
listed per node. At a change point, "changed here" is what differs between the last run before it and the first
run after it; "also changed earlier without effect" is what differed between two successive runs of the
window earlier on, where no change point followed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

from run_benchmarks.results.history.series import Point
from run_benchmarks.results.report.facts import flat_settings, round_facts

VALUE_CHARS = 80  # a probe's output (lscpu, a topology matrix) is named changed, not printed whole
HIDDEN = {"hostname", "launcher_log", "exit_code", "node_rank", "host"}  # said by "hosts", or per round


@dataclass(frozen=True)
class Change:
    key: str
    before: str
    after: str
    run_id: str  # the first run with the new value
    date: str

    def words(self) -> str:
        return f"{self.key} {short(self.before)} -> {short(self.after)}"


def short(value: str) -> str:
    return value if len(value) <= VALUE_CHARS else value[:VALUE_CHARS - 12] + f"... ({len(value)} chars)"


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (list, tuple)):
        return ", ".join(map(_text, value))
    return str(value).strip()


def snapshot(point: Point) -> dict[str, str]:
    """The point's environment as ``key -> text``, from its first ok round (else its first round)."""
    attempt = next((a for a in point.attempts if a.ok), point.attempts[0])
    env = attempt.get("environment") or {}
    orch = env.get("orchestrator") or {}
    out: dict[str, str] = {}
    commit = orch.get("accelbench_commit") or attempt.get("accelbench_commit")
    if commit:
        out["accelbench commit"] = str(commit)[:12] + (" (dirty)" if orch.get("accelbench_dirty") else "")
    if env.get("vendor_file_sha256"):
        out["vendor file sha256"] = str(env["vendor_file_sha256"])[:16]
    if attempt.get("extern_config_hash"):
        out["extern config sha256"] = str(attempt["extern_config_hash"])[:16]
    nodes = [n for n in env.get("nodes") or [] if isinstance(n, dict)]
    if nodes:
        out["hosts"] = ", ".join(str(n.get("host")) for n in nodes)
    per_node: dict[str, dict[int, str]] = {}
    for rank, node in enumerate(nodes):
        fields = {"image": node.get("image"), "image digest": node.get("image_id"),
                  **{f"probe {k}": v for k, v in (node.get("probes") or {}).items()},
                  **{k: v for k, v in (node.get("environment") or {}).items() if k not in HIDDEN}}
        for key, value in fields.items():
            if value is not None:
                per_node.setdefault(key, {})[rank] = _text(value)
    for key, values in per_node.items():
        if len(set(values.values())) == 1 and len(values) == len(nodes):
            out[key] = next(iter(values.values()))
        else:
            out.update({f"node {rank} {key}": value for rank, value in values.items()})
    spec = round_facts(attempt).spec
    for key, value in flat_settings({"debug": (spec or {}).get("debug") or {}}).items():
        out[key] = _text(value)
    return out


def diff(a: dict[str, str], b: dict[str, str], point: Point) -> list[Change]:
    return [Change(k, a.get(k, "-"), b.get(k, "-"), point.run_id, point.date)
            for k in sorted(set(a) | set(b)) if a.get(k, "-") != b.get(k, "-")]


@dataclass(frozen=True)
class Explained:
    here: list[Change]
    earlier: list[Change]


def explain(points: Sequence[Point], shifts: Sequence[tuple[int, int]]) -> list[Explained]:
    """For each change point, given as (last point before, first point after) indices into ``points``: what
    differs between those two runs, and what changed between two successive runs earlier, at no change point."""
    snaps = [snapshot(p) for p in points]
    steps = {i: diff(snaps[i - 1], snaps[i], points[i]) for i in range(1, len(points))}
    spans = {i for last, first in shifts for i in range(last + 1, first + 1)}
    return [Explained(diff(snaps[last], snaps[first], points[first]),
                      [c for i in range(1, last + 1) if i not in spans for c in steps[i]]) for last, first in shifts]
