"""What a certificate binds, built from the results store and the run folder (``accelbench certify``).

Fields, in the order the file shows them:

- ``compliance``: first, in words: ``compliant``, ``NON-COMPLIANT: <workload>: <keys>`` or ``not judged``;
- ``schema``, ``accelbench_version``, ``issued_at``, ``valid_until`` (the validity period);
- ``run``: its id, source, status, times, command and accelbench commit;
- ``workloads``: per workload (report's rows): the case name, workload hash, resolved settings and their
  SHA-256, the policy verdict with the SHA-256 of each file it was judged from (case files, extern config,
  vendor file, policies), the extern config's name and SHA-256, each figure's mean and spread, and every
  round's status and figures;
- ``environment``: the orchestrator's and each node's (host, image and its digest, driver, firmware,
  framework and communication-library versions as the probes and workers recorded them);
- ``files``: the SHA-256 and size of every file of the run folder (every raw log, results.json, config.json),
  file by file, named as a bundle holds them under ``run/`` (a tar file's own bytes are not reproducible);
- ``records``: the SHA-256 of every stored round record (canonical JSON), as a bundle's
  ``store/attempts.json`` holds it;
- ``baseline`` (optional): another run, paired per workload as ``compare`` pairs them, with the verdict
  ``tokens/s/device >= N % of the baseline's``.
"""
from __future__ import annotations

import hashlib
import math
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Optional

from run_benchmarks import __version__
from run_benchmarks.errors import UserError
from run_benchmarks.results.bundle.archive import IMPORTED
from run_benchmarks.results.certificate.signing import sha256_of
from run_benchmarks.results.report import compliance_marks
from run_benchmarks.results.report.compare import Selection, compare
from run_benchmarks.results.report.summary import CaseSummary, summarize
from run_benchmarks.results.store.schema import METRIC_COLUMNS, MONITOR_COLUMNS, Attempt
from run_benchmarks.results.store.store import ResultStore

SCHEMA = "accelbench.certificate/1"
FIGURE = "tokens_per_s_per_device"  # what a baseline verdict compares
ROUND_FIGURES = tuple(c for c, _, _ in METRIC_COLUMNS) + MONITOR_COLUMNS + ("wall_time_s",)


def finite(value: Any) -> Any:
    """Canonical JSON has no NaN or infinity: such a figure is certified as its text."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value


def file_hashes(store_run: dict, attempts: list[Attempt]) -> dict[str, dict]:
    """Every file of the run folder (an import: the logs it was read from), as the bundle names it under run/."""
    files: list[tuple[Path, str]] = []
    if store_run["source"] == "accelbench":
        folder = Path(store_run.get("log_dir") or "")
        if not store_run.get("log_dir") or not folder.is_dir():
            raise UserError(f"run {store_run['run_id']}: its folder {store_run.get('log_dir')} is gone, and a "
                            "certificate binds the hash of every log", "certify it on the machine that holds its "
                                                                        "run folder")
        files = [(p, p.relative_to(folder).as_posix()) for p in sorted(folder.rglob("*"))
                 if p.is_file() and not p.is_symlink()]
    else:
        files = [(Path(a["results_path"]), f"{IMPORTED}/{a['round']}-{Path(a['results_path']).name}")
                 for a in attempts if a.get("results_path") and Path(a["results_path"]).is_file()]
    out = {}
    for path, name in files:
        sha, size = hashlib.sha256(), 0
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                sha.update(chunk)
                size += len(chunk)
        out[name] = {"sha256": sha.hexdigest(), "bytes": size}
    return out


def record_entry(row: dict) -> dict:
    """A stored round record's SHA-256, with the round it is (two workloads of one case name may share a round
    number: the check matches hashes, the names are for reading)."""
    return {"attempt": f"{row['case_name']} round {row['round']} attempt {row['attempt']}",
            "sha256": sha256_of(row.get("record"))}


def _workload(summary: CaseSummary) -> dict:
    first = summary.attempts[0]
    verdict = compliance_marks.of_attempts(summary.attempts)
    settings = first.get("workload")
    return {
        "case_name": summary.label, "config": summary.config, "workload_hash": summary.workload_hash,
        "settings": settings, "settings_sha256": sha256_of(settings) if settings is not None else None,
        "compliance": verdict.model_dump(mode="json") if verdict is not None else None,
        "extern_config": {"name": summary.config, "sha256": first.get("extern_config_hash")}
        if first.get("extern_config") else None,
        "figures": {key: {"mean": s.mean, "cv": s.cv, "n": s.n, "min": s.min, "max": s.max}
                    for key, s in summary.figures.items()},
        "rounds": [{"round": a["round"], "attempt": a["attempt"], "status": a["status"], "reason": a.get("reason"),
                    "figures": {k: a.get(k) for k in ROUND_FIGURES if a.get(k) is not None}}
                   for a in summary.attempts],
    }


def compliance_words(summaries: list[CaseSummary]) -> str:
    """The certificate's first field: what its workloads are against their cases' policies, in words."""
    verdicts = [(s, compliance_marks.of_attempts(s.attempts)) for s in summaries]
    departing = [f"{s.label} {s.config}: {', '.join(v.keys)}" for s, v in verdicts if v is not None and not v.compliant]
    unjudged = [f"{s.label} {s.config}" for s, v in verdicts if v is None]
    if departing:
        return f"NON-COMPLIANT: departs from its case's policy: {'; '.join(departing)}"
    if unjudged and len(unjudged) == len(verdicts):
        return "not judged: no round carries a policy verdict (an import, or a run from before policies)"
    return "compliant: every workload follows its case's policy" + (f" (not judged: {'; '.join(unjudged)})"
                                                                      if unjudged else "")


def _environment(attempts: list[Attempt]) -> dict:
    nodes: list[dict] = []
    for a in attempts:
        for node in (a.get("environment") or {}).get("nodes") or []:
            entry = {k: node.get(k) for k in ("host", "node_rank", "image", "image_id", "environment", "probes")
                     if node.get(k) is not None}
            if entry not in nodes:
                nodes.append(entry)
    orchestrator = next(((a.get("environment") or {}).get("orchestrator") for a in attempts
                         if (a.get("environment") or {}).get("orchestrator")), {})
    return {"orchestrator": orchestrator, "nodes": nodes}


def _baseline(store: ResultStore, run_id: str, ref: str, at_least: float, attempts: list[Attempt]) -> dict:
    """The run against ``ref`` per workload (compare's pairing; A = the baseline, B = this run)."""
    base_id = store.resolve_run(ref)
    if base_id == run_id:
        raise UserError(f"--baseline {ref} is the run being certified", "name another run as the baseline")
    base, mine = Selection(base_id, (base_id,), {}), Selection(run_id, (run_id,), {})
    pairs = []
    for row in compare(base, mine, store.attempts(run_ids=[base_id]), attempts):
        if row.b is None:
            continue
        change = row.change(FIGURE)
        ratio = None if change is None else change + 1
        verdict = ("no baseline row" if row.a is None else "no figure to compare" if ratio is None
                   else f"{'pass' if ratio >= at_least else 'FAIL'}: {ratio:.1%} of the baseline's")
        pairs.append({"workload": row.label, "figure": FIGURE, "certified": row.b.mean(FIGURE),
                      "baseline": row.a.mean(FIGURE) if row.a else None, "ratio": ratio, "verdict": verdict,
                      "departs": row.departs or None})
    return {"run_id": base_id, "rule": f"{FIGURE} >= {at_least:.0%} of the baseline's", "pairs": pairs}


def build(store: ResultStore, ref: str, valid_days: float, baseline: Optional[str] = None,
          baseline_at_least: float = 0.95, now: Optional[datetime] = None) -> dict:
    """The certificate of run ``ref`` (id, prefix, ``last``), unsigned."""
    if not (math.isfinite(valid_days) and 0 < valid_days <= 36_600):
        raise UserError(f"--valid-days {valid_days:g}: a validity period is 1 day to 100 years",
                        "e.g. --valid-days 365")
    run_id = store.resolve_run(ref)
    run = store.run(run_id)
    if run["status"] == "running":
        raise UserError(f"run {run_id} is still running: its logs and rows are not final",
                        "wait for it to end (or, if its orchestrator died, run `accelbench store repair`)")
    attempts = store.attempts(run_ids=[run_id])
    if not attempts:
        raise UserError(f"run {run_id} has no attempt to certify", "certify a run that ran a round")
    summaries = summarize(attempts)
    issued = (now or datetime.now(timezone.utc)).replace(microsecond=0)
    document = {
        "compliance": compliance_words(summaries),
        "schema": SCHEMA,
        "accelbench_version": __version__,
        "issued_at": issued.isoformat(),
        "valid_until": (issued + timedelta(days=valid_days)).isoformat(),
        "run": {k: run.get(k) for k in ("run_id", "source", "status", "started_at", "ended_at", "argv",
                                         "accelbench_commit")},
        "workloads": [_workload(s) for s in summaries],
        "environment": _environment(attempts),
        "files": file_hashes(run, attempts),
        "records": [record_entry(a.row) for a in attempts],
    }
    if baseline is not None:
        document["baseline"] = _baseline(store, run_id, baseline, baseline_at_least, attempts)
    return finite(document)
