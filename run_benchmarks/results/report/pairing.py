"""Which workloads of two sides pair when nothing but one setting differs, and what differs where nothing
pairs: the settings compared flattened (``train.micro_batch_size 4/8``), a side's default read ``default``."""
from __future__ import annotations

from typing import Optional, Sequence

from run_benchmarks.results.report.summary import CaseSummary

CASE_SETTINGS = ("case", "framework", "framework_version", "hardware", "nnodes", "nprocs_per_node")


def flat(tree: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def setting_differences(sa: CaseSummary, sb: CaseSummary) -> list[str]:
    """``name A/B`` for each case column and workload setting (flattened, ``train.micro_batch_size``) that
    differs; a setting one side leaves at its default reads ``default``."""
    out = [f"{f} {sa.key.get(f)}/{sb.key.get(f)}" for f in CASE_SETTINGS if sa.key.get(f) != sb.key.get(f)]
    if sa.what.spec is None or sb.what.spec is None:
        if sa.key.get("extern_config") != sb.key.get("extern_config"):
            out.append(f"extern_config {sa.key.get('extern_config')}/{sb.key.get('extern_config')}")
        fa, fb = sa.facts, sb.facts  # an import's --set overrides
        return out + [f"{k} {fa.get(k, 'default')}/{fb.get(k, 'default')}" for k in sorted({*fa, *fb})
                      if "." in k and fa.get(k) != fb.get(k)]
    fa, fb = flat(sa.what.spec), flat(sb.what.spec)
    for key in sorted(set(fa) | set(fb)):
        if fa.get(key) != fb.get(key):
            out.append(f"{key} {fa.get(key, 'default')}/{fb.get(key, 'default')}")
    return out


def pair_by_one_setting(pairs: list[tuple]) -> list[tuple]:
    """Rows left with one side only pair with the other side's nearest row when the two differ in exactly
    one setting (two runs of one case, micro batch 4 and 8)."""
    lonely = [sb for sa, sb in pairs if sa is None]
    taken: set[int] = set()
    out = []
    for sa, sb in pairs:
        if sa is not None and sb is None:
            near = [r for r in lonely if id(r) not in taken and len(setting_differences(sa, r)) == 1]
            if near:
                sb = near[0]
                taken.add(id(sb))
        out.append((sa, sb))
    return [(sa, sb) for sa, sb in out if not (sa is None and id(sb) in taken)]


def nothing_in_common(rows: Sequence, closest: int = 3) -> Optional[list[str]]:  # rows: compare.Row
    """When no row has both sides: one line saying so, then the ``closest`` pairs (fewest differing
    settings) with what differs in each; None when something paired."""
    if not rows or any(r.a is not None and r.b is not None for r in rows):
        return None
    lefts, rights = [r.a for r in rows if r.a], [r.b for r in rows if r.b]
    near = sorted(((setting_differences(a, b), i, j) for i, a in enumerate(lefts) for j, b in enumerate(rights)),
                  key=lambda t: (len(t[0]), t[1], t[2]))[:closest]
    lines = [f"nothing in common: none of A's {len(lefts)} workload(s) ran on B's side ({len(rights)} workload(s)) "
             "with the same settings" + ("; the closest pairs:" if near else "")]
    for diffs, i, j in near:
        lines.append(f"  {lefts[i].label} {lefts[i].config} vs {rights[j].label} {rights[j].config}: "
                     f"{len(diffs)} setting(s) differ: {', '.join(diffs[:6])}" + (" ..." if len(diffs) > 6 else ""))
    return lines
