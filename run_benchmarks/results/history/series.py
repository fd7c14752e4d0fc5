"""Stored attempts -> one series per workload: a point per run, ordered by when the run measured.

A workload is what report/summary.py groups rounds by (the hash of the resolved workload, with the vendor), less
the ``debug.*`` settings: they slow a run (an injected delay, a straggler) without changing what it trains, so a
run with ``debug.compute_delay_ms`` set is a point of the same series, and the setting is shown as what changed
there (explain.py). Rows without a stored workload (older imports) keep summary.py's grouping by case columns.

A point is one run's rounds of the workload (one per run and exact workload: two debug variants in one run are
two points); its figures are summary.py's means over its ok rounds that were not contended. Contended rounds are
left out and named; a run whose ok rounds were all contended is a point without figures, kept so that ``--check``
knows the newest run could not be judged. Its time is its first round's start, for an import the log's own time
stamp (importers: Span), else the run's start in the store (said: ``at_source``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Optional, Sequence

from run_benchmarks.results.figures import contention
from run_benchmarks.results.report import compliance_marks
from run_benchmarks.results.report.facts import RoundFacts, case_name_of, round_facts
from run_benchmarks.results.report.summary import CaseSummary, FIGURE_BY_KEY, group_key, summarize
from run_benchmarks.results.store.schema import Attempt
from run_benchmarks.results.rounds.workload import workload_hash

# The figures a history shows, in order (summary.py's keys; "memory" is the row's headline memory figure).
FIGURES = ("tokens_per_s_per_device", "samples_per_s", "step_time_median_s", "mfu", "memory", "tokens_per_joule",
           "loss_last")
# The figure change points are looked for in, the first a workload's points have: the rate every round's own
# noise interval is about (results/figures/noise.py).
JUDGED = ("tokens_per_s_per_device", "samples_per_s")


def parse_time(text: Optional[str]) -> Optional[datetime]:
    """An ISO time from a row (a naive one read as UTC), None when missing or unreadable."""
    if not text:
        return None
    try:
        at = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return at if at.tzinfo else at.replace(tzinfo=timezone.utc)


@dataclass
class Point:
    run_id: str
    at: datetime
    at_source: str  # "round start", "log time stamp" (an import) or "run start" (no time in its rounds)
    attempts: list[Attempt]  # every round of the workload in this run
    summary: Optional[CaseSummary]  # over the ok rounds that were not contended; None when none
    contended: list[str] = field(default_factory=list)  # one line per contended round, left out

    @property
    def date(self) -> str:
        return self.at.strftime("%Y-%m-%d %H:%M")

    def value(self, key: str) -> Optional[float]:
        if self.summary is None:
            return None
        if key == "memory":
            found = self.summary.memory_figure
            return found.value if found else None
        return self.summary.mean(key)

    def log_se(self, key: str) -> Optional[float]:
        return self.summary.log_se(key) if self.summary is not None else None

    @property
    def non_compliant(self) -> bool:
        return compliance_marks.departs(self.attempts)

    @property
    def failed(self) -> list[str]:
        """``round 1 failed: node 0 exited with 1`` per round that did not end ok."""
        return [f"round {a.get('round')} {a.get('status')}: {a.get('reason') or ''}".rstrip(": ")
                for a in self.attempts if not a.ok]


@dataclass
class Workload:
    key: tuple
    what: RoundFacts
    points: list[Point]  # oldest first
    label: str = ""  # the case name, config and the settings that tell it from the other workloads shown

    @property
    def id(self) -> str:
        """The 16-hex-digit identity without debug settings (or the case columns' text for older rows)."""
        return str(self.key[1]) if self.key[0] == "workload" else "case " + " ".join(map(str, self.key[1:]))

    @property
    def figure(self) -> Optional[str]:
        return next((f for f in JUDGED if any(p.value(f) is not None for p in self.points)), None)

    @property
    def higher_is_better(self) -> bool:
        return FIGURE_BY_KEY[self.figure].higher_is_better if self.figure else True

    @property
    def judged_points(self) -> list[Point]:
        """The points the change search reads: a figure, from rounds that were not contended."""
        return [p for p in self.points if self.figure and p.value(self.figure) is not None]

    @property
    def non_compliant(self) -> bool:
        return any(p.non_compliant for p in self.points)

    @property
    def mixed_compliance(self) -> bool:
        """Compliant and departing points in one series: its views say so beside the figures."""
        return len({p.non_compliant for p in self.points}) > 1


def history_key(attempt: Attempt, what: RoundFacts) -> tuple:
    """summary.group_key, with the workload's ``debug`` section left out of the hash."""
    if what.workload_hash is None or not isinstance(what.spec, dict):
        return group_key(attempt, what)
    name = case_name_of(attempt)
    resolved = {"case": name.case, "framework": name.framework, "framework_version": name.framework_version,
                "hardware": name.hardware, "nnodes": name.nnodes, "nprocs_per_node": name.nprocs_per_node,
                "spec": {k: v for k, v in what.spec.items() if k != "debug"}}
    return ("workload", workload_hash(resolved), attempt.get("vendor"))


def is_contended(attempt: Attempt) -> bool:
    return (contention.of(attempt.get("monitor")) or {}).get("verdict") == contention.CONTENDED


def build(attempts: Sequence[Attempt], run_started: dict[str, str]) -> list[Workload]:
    """Every workload of ``attempts`` with its points; ``run_started``: each run's start (the store's runs)."""
    groups: dict[tuple, tuple[RoundFacts, dict[tuple, list[Attempt]]]] = {}
    for attempt in attempts:
        what = round_facts(attempt)
        runs = groups.setdefault(history_key(attempt, what), (what, {}))[1]
        runs.setdefault((attempt["run_id"], what.workload_hash), []).append(attempt)
    out = []
    for key, (what, runs) in groups.items():
        points = [_point(run_id, members, run_started.get(run_id)) for (run_id, _), members in runs.items()]
        points.sort(key=lambda p: (p.at, p.run_id))
        out.append(Workload(key, what, points))
    return out


def _point(run_id: str, members: list[Attempt], run_start: Optional[str]) -> Point:
    stamps = [t for t in (parse_time(a.get("started_at")) for a in members) if t is not None]
    if stamps:
        imported = str(members[0].get("source") or "").startswith("import:")
        at, source = min(stamps), "log time stamp" if imported else "round start"
    else:
        at, source = parse_time(run_start) or datetime.fromtimestamp(0, timezone.utc), "run start"
    usable = [a for a in members if a.ok and not is_contended(a)]
    summary = summarize(usable)[0] if usable else None
    return Point(run_id, at, source, members, summary, contention.contended_rounds([a for a in members if a.ok]))


def window(points: list[Point], since: Optional[datetime], last: Optional[int]) -> list[Point]:
    """The points from ``since`` on, then the newest ``last`` of them."""
    kept = [p for p in points if since is None or p.at >= since]
    return kept[-last:] if last else kept


def name(workloads: Sequence[Workload]) -> None:
    """Each workload's label: its case name and config, with the settings that tell it from the others shown
    (never two alike); ``debug.*`` settings are a point's, not the workload's."""
    from run_benchmarks.results.report.facts import describe, varying_settings

    shown = [next((p.summary for p in reversed(w.points) if p.summary), None) or summarize(w.points[-1].attempts)[0]
             for w in workloads]
    keys = [k for k in varying_settings(shown) if not k.startswith("debug.")]
    for w, s in zip(workloads, shown):
        words = describe({k: v for k, v in s.facts.items() if not k.startswith("debug.")}, keys)
        w.label = f"{s.label}" + (f" {s.config}" if s.config != "-" else "") + (f" ({words})" if words else "")
