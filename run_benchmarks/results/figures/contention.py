"""A round's contention verdict: its nodes' figures (execute/contention.py) against the limits
(catalog/contention_limits.py), and how every view reads and words the stored verdict.

Past any limit the round is ``contended``: no command judges it (compare, ``--check``: exit 7), and each
view names it in one short line with its figure and limit. ``quiet`` is a measured round within every
limit; ``not measured`` says why (no monitor, not Linux). Who the others were (pids, names) is only in
``show --verbose``.
"""
from __future__ import annotations

from typing import Optional

from run_benchmarks.catalog.contention_limits import ContentionLimits

CONTENDED, QUIET, NOT_MEASURED = "contended", "quiet", "not measured"


def _pct(x: float) -> str:
    return f"{x:.0%}" if x >= 0.01 or x == 0 else f"{x:.1%}"


def reasons(figures: dict, limits: ContentionLimits) -> list[str]:
    """One short line per figure past its limit."""
    out = []
    cores = len(figures.get("cores") or []) or None
    checks = (("others_cpu_share", lambda v: f"others used {_pct(v)} of the run's {cores} core(s)"),
              ("steal_share", lambda v: f"CPU steal {_pct(v)}"),
              ("memory_pressure_share", lambda v: f"memory pressure {_pct(v)}"),
              ("load_per_core", lambda v: f"load average {figures.get('load_average')} "
                                          f"({v:.2g} per core)"))
    for key, words in checks:
        value, limit = figures.get(key), getattr(limits, key)
        if value is not None and limit is not None and value > limit:
            out.append(f"{words(value)} (limit {_pct(limit) if key != 'load_per_core' else f'{limit:g}'})")
    devices = figures.get("device_others") or {}
    if limits.device_processes is not None and (devices.get("count") or 0) >= limits.device_processes:
        on = sorted({p["device"] for p in devices["processes"]})
        utils = [p["util_percent"] for p in devices["processes"] if p["util_percent"] is not None]
        out.append(f"{devices['count']} other process(es) on device {', '.join(map(str, on))}"
                   + (f" (up to {max(utils):.0f} % busy)" if utils else ""))
    return out


def judge(nodes: list[dict], limits: ContentionLimits) -> dict:
    """The round's verdict from its nodes' figures (``{"node_rank", "host", **node_figures}`` each)."""
    measured = [n for n in nodes if n.get("measured")]
    lines = []
    for node in measured:
        where = f"node {node['node_rank']} ({node['host']}): " if len(nodes) > 1 else ""
        lines += [where + line for line in reasons(node, limits)]
    verdict = CONTENDED if lines else QUIET if measured else NOT_MEASURED
    headline = {key: max((n[key] for n in measured if n.get(key) is not None), default=None)
                for key in ("others_cpu_share", "steal_share", "memory_pressure_share", "load_average")}
    return {"verdict": verdict, "reasons": lines, **headline, "limits": limits.model_dump(), "nodes": nodes,
            **({} if measured else {"why": next((n.get("why") for n in nodes if n.get("why")), "no monitor")})}


def warning(contention: Optional[dict]) -> Optional[str]:
    """The round's one-line warning when it is contended."""
    if not contention or contention.get("verdict") != CONTENDED:
        return None
    return f"contended over the measured steps: {'; '.join(contention['reasons'])}: not judged"


def of(record_monitor: Optional[dict]) -> Optional[dict]:
    """The stored verdict of a round (its record's ``monitor.contention``), None when none was measured."""
    found = (record_monitor or {}).get("contention")
    return found if isinstance(found, dict) and found.get("verdict") in (CONTENDED, QUIET, NOT_MEASURED) else None


def line(found: Optional[dict]) -> str:
    """``contended: others used 63% ... (limit 25%)`` or ``quiet: others 3% of 2 core(s), steal 1%, ...``."""
    if not found:
        return "n/a (not measured: no monitor)"
    if found["verdict"] == NOT_MEASURED:
        return f"not measured: {found.get('why', '')}"
    if found["verdict"] == CONTENDED:
        return "contended, not judged: " + "; ".join(found["reasons"])
    return "quiet: " + figures_text(found)


def figures_text(found: dict) -> str:
    node = next((n for n in found.get("nodes") or [] if n.get("measured")), {})
    parts = []
    if found.get("others_cpu_share") is not None:
        parts.append(f"others {_pct(found['others_cpu_share'])} of {len(node.get('cores') or [])} core(s)")
    for key, words in (("steal_share", "steal"), ("memory_pressure_share", "memory pressure")):
        if found.get(key) is not None:
            parts.append(f"{words} {_pct(found[key])}")
    if found.get("load_average") is not None:
        parts.append(f"load {found['load_average']:g}")
    covered = node.get("covered_s")
    return ", ".join(parts) + (f" over {node.get('window', 'the measured steps')} ({covered:g} s)" if covered else "")


def verbose_lines(found: Optional[dict]) -> list[str]:
    """Per node, who the others were: pids, names, CPU seconds, and the other processes on the run's devices."""
    out = []
    for node in (found or {}).get("nodes") or []:
        where = f"node {node.get('node_rank')} ({node.get('host')})"
        if not node.get("measured"):
            out.append(f"{where}: not measured: {node.get('why', '')}")
            continue
        out.append(f"{where}: cores {node.get('cores')}, {figures_text({**node, 'nodes': [node]})}")
        if node.get("others_why"):
            out.append(f"  others' CPU not measured: {node['others_why']}")
        for other in node.get("others") or []:
            share = f" ({_pct(other['share'])} of the cores)" if other.get("share") is not None else ""
            out.append(f"  pid {other['pid']} {other['name']}: {other['cpu_s']:g} s of CPU{share}")
        devices = node.get("device_others") or {}
        for p in devices.get("processes") or []:
            util = f", {p['util_percent']:.0f} % busy" if p.get("util_percent") is not None else ""
            out.append(f"  device {p['device']}: pid {p['pid']}{util}")
        if devices.get("why"):
            out.append(f"  device processes: {devices['why']}")
    return out


def contended_rounds(attempts) -> list[str]:
    """``round 2: others used 63% of the run's 2 core(s) (limit 25%)`` for each contended one of ``attempts``."""
    out = []
    for a in attempts:
        found = of(a.get("monitor"))
        if found and found["verdict"] == CONTENDED:
            out.append(f"round {a.get('round')}: {'; '.join(found['reasons'])}")
    return out


def cell(attempts) -> str:
    """What the report's column says of a row's rounds: quiet, contended (how many), or n/a (not measured)."""
    verdicts = [(of(a.get("monitor")) or {}).get("verdict") for a in attempts]
    bad = sum(v == CONTENDED for v in verdicts)
    if bad:
        return f"contended ({bad} of {len(verdicts)})" if len(verdicts) > 1 else "contended"
    return "quiet" if verdicts and all(v == QUIET for v in verdicts) else "n/a"
