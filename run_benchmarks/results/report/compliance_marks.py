"""The non-compliant mark, in one wording for every view: the run's table and ``report`` (a ``policy`` column
where some row departs, and a flag naming each departure), ``show``, ``compare`` and the finetune table (the
side that departs is named beside every change), and the exports (``compliant`` and ``departures`` fields).

The verdict is the round record's (``RoundRecord.compliance``, judged when the round was planned); a row of
several rounds departs when any of them does. Rows with no verdict (imports, rounds from before policies)
are "not judged" and carry no mark. Ranking a departing row beside compliant ones always says so
(``ranking_note``): its figures come from another workload than the case's.
"""
from __future__ import annotations

from typing import Optional, Sequence

from run_benchmarks.catalog.compliance import NON_COMPLIANT, Compliance

RANKING_NOTE = (f"rows marked {NON_COMPLIANT} depart from their case's policy (each departure is named below): "
                "their figures are not comparable with the compliant rows'")


def of_attempt(attempt) -> Optional[Compliance]:
    """The verdict a stored attempt's record carries (None: not judged)."""
    typed = getattr(attempt, "typed", None)
    if typed is not None:
        return typed.compliance
    found = ((attempt.get("record") or {}) if hasattr(attempt, "get") else {}).get("compliance")
    return Compliance.model_validate(found) if found else None


def of_attempts(attempts: Sequence) -> Optional[Compliance]:
    """A row's verdict: the first departing round's, else the first judged one's."""
    verdicts = [v for v in (of_attempt(a) for a in attempts) if v is not None]
    return next((v for v in verdicts if not v.compliant), verdicts[0] if verdicts else None)


def departs(attempts: Sequence) -> bool:
    verdict = of_attempts(attempts)
    return verdict is not None and not verdict.compliant


def word(attempts: Sequence) -> str:
    """``compliant``, ``non-compliant`` or ``not judged``: the row's cell in a ``policy`` column."""
    verdict = of_attempts(attempts)
    return "not judged" if verdict is None else "compliant" if verdict.compliant else NON_COMPLIANT


def flags(attempts: Sequence) -> list[str]:
    """The row's flag naming each departure (none for a compliant or unjudged row)."""
    verdict = of_attempts(attempts)
    if verdict is None or verdict.compliant:
        return []
    return [f"{NON_COMPLIANT} with its case's policy: " + "; ".join(d.sentence() for d in verdict.departures)]


def export_fields(attempts: Sequence) -> dict:
    """``compliant`` (true, false or empty: not judged) and ``departures`` (``key=value`` each) for a CSV or
    JSON row."""
    verdict = of_attempts(attempts)
    if verdict is None:
        return {"compliant": None, "departures": None}
    return {"compliant": verdict.compliant,
            "departures": "; ".join(f"{d.key}={d.value}" for d in verdict.departures) or None}


def any_departs(summaries: Sequence) -> bool:
    return any(departs(s.attempts) for s in summaries)


def ranking_note(summaries: Sequence) -> Optional[str]:
    """Said under a table that ranks departing rows beside compliant ones."""
    marks = {departs(s.attempts) for s in summaries}
    return RANKING_NOTE if marks == {True, False} else None


def sides(a, b, names: tuple[str, str] = ("A", "B")) -> str:
    """``A non-compliant``, ``B non-compliant``, ``A and B non-compliant`` or empty: which side of a pair
    (compare's; the finetune table's, named Torch and Paddle) departs. ``a``/``b``: summaries or None."""
    names = [name for name, side in zip(names, (a, b)) if side is not None and departs(side.attempts)]
    return f"{' and '.join(names)} {NON_COMPLIANT}" if names else ""


def pair_lines(rows: Sequence) -> list[str]:
    """Under a compare: each departing side, once, with its departures (``B gpt2_tiny ...: non-compliant ...``)."""
    out = []
    for row in rows:
        for name, side in (("A", row.a), ("B", row.b)):
            for flag in flags(side.attempts) if side is not None else []:
                line = f"{name} {side.label} {side.config}: {flag}"
                if line not in out:
                    out.append(line)
    return out
